"""The one client of Temporal for channels (the API) and operators (the CLI): `gateway` starts,
updates and describes workflows; `changes` and `kept` read what histories hold without asking a worker."""
