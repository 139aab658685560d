"""How every part reaches Temporal: Temporal's own environment configuration (variables and a TOML
profile), settled's two variables winning, an API key from a file, and no secret in what is shown."""

from pathlib import Path

import pytest

from settled.runtime.config import Settings, SettingsError

KEY = "tk-" + "5e" * 30


def test_without_anything_set_it_is_the_local_dev_server_in_plaintext() -> None:
    settings = Settings.from_env({})
    assert (settings.temporal_address, settings.namespace) == ("127.0.0.1:7233", "default")
    options = settings.temporal.connect_options()
    assert "tls" not in options and "api_key" not in options


def test_temporal_variables_are_read_and_an_api_key_turns_on_tls() -> None:
    env = {
        "TEMPORAL_ADDRESS": "ns.acct.tmprl.cloud:7233",
        "TEMPORAL_NAMESPACE": "ns.acct",
        "TEMPORAL_API_KEY": KEY,
    }
    settings = Settings.from_env(env)
    assert (settings.temporal_address, settings.namespace) == ("ns.acct.tmprl.cloud:7233", "ns.acct")
    options = settings.temporal.connect_options()
    assert options["api_key"] == KEY and options["tls"] is True
    assert settings.temporal.described()["api_key"] == "TEMPORAL_API_KEY"


def test_settled_variables_win_over_temporals() -> None:
    env = {
        "TEMPORAL_ADDRESS": "elsewhere:7233",
        "TEMPORAL_NAMESPACE": "other",
        "SETTLED_TEMPORAL_ADDRESS": "127.0.0.1:7999",
        "SETTLED_NAMESPACE": "mine",
    }
    settings = Settings.from_env(env)
    assert (settings.temporal_address, settings.namespace) == ("127.0.0.1:7999", "mine")


def test_a_profile_of_the_toml_file_is_read(tmp_path: Path) -> None:
    config = tmp_path / "temporal.toml"
    config.write_text(
        '[profile.prod]\naddress = "prod.example:7233"\nnamespace = "prod"\n'
        f'api_key = "{KEY}"\n[profile.prod.grpc_meta]\nx-team = "payments"\n'
    )
    settings = Settings.from_env({"TEMPORAL_CONFIG_FILE": str(config), "TEMPORAL_PROFILE": "prod"})
    assert (settings.temporal_address, settings.namespace) == ("prod.example:7233", "prod")
    options = settings.temporal.connect_options()
    assert options["api_key"] == KEY and options["rpc_metadata"] == {"x-team": "payments"}
    assert settings.temporal.described()["api_key"] == "profile 'prod'"


def test_tls_can_be_turned_off_beside_an_api_key() -> None:
    settings = Settings.from_env({"TEMPORAL_API_KEY": KEY, "TEMPORAL_TLS": "false"})
    assert settings.temporal.connect_options()["tls"] is False


def test_an_api_key_file_wins_and_is_read_stripped(tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text(KEY + "\n")
    settings = Settings.from_env(
        {"TEMPORAL_API_KEY": "tk-other-key", "SETTLED_TEMPORAL_API_KEY_FILE": str(key_file)}
    )
    assert settings.temporal.connect_options()["api_key"] == KEY
    assert settings.temporal.api_key_file == key_file


def test_a_missing_tls_file_or_a_certificate_without_its_key_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="does not exist"):
        Settings.from_env({"TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(tmp_path / "ca.crt")})
    cert = tmp_path / "client.crt"
    cert.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    with pytest.raises(SettingsError, match="TEMPORAL_TLS_CLIENT_KEY_PATH"):
        Settings.from_env({"TEMPORAL_TLS_CLIENT_CERT_PATH": str(cert)})


def test_a_certificate_or_key_that_is_not_pem_is_refused_naming_the_setting(tmp_path: Path) -> None:
    der = tmp_path / "ca.der"
    der.write_bytes(b"\x30\x82\x01\x0a\x00binary")
    with pytest.raises(SettingsError, match=r"TEMPORAL_TLS_SERVER_CA_CERT_PATH: .* is not PEM \(DER"):
        Settings.from_env({"TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(der)})
    request = tmp_path / "client.csr"
    request.write_text("-----BEGIN CERTIFICATE REQUEST-----\nMIIB\n-----END CERTIFICATE REQUEST-----\n")
    with pytest.raises(SettingsError, match="holds a PEM CERTIFICATE REQUEST, not a certificate"):
        Settings.from_env(
            {"TEMPORAL_TLS_CLIENT_CERT_PATH": str(request), "TEMPORAL_TLS_CLIENT_KEY_PATH": str(request)}
        )


def test_no_secret_shows_in_the_settings_repr_or_description() -> None:
    body = "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg"
    pem = f"-----BEGIN PRIVATE KEY-----\n{body}\n-----END PRIVATE KEY-----"
    env = {
        "TEMPORAL_API_KEY": KEY,
        "TEMPORAL_TLS_CLIENT_CERT_DATA": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
        "TEMPORAL_TLS_CLIENT_KEY_DATA": pem,
    }
    settings = Settings.from_env(env)
    shown = repr(settings) + repr(settings.temporal.described())
    assert KEY not in shown and "MIGHAgEAMBMG" not in shown
    assert settings.temporal.scrub(f"the server said {KEY}") == "the server said [redacted]"
