"""Hypothesis strategies for a tool call's arguments as any caller may send them: any JSON object,
with text of any code points (lone surrogates included), nested, or a refund's shape with any text.
Shared by the fuzzing of every edge that takes params (the adapters, MCP, the platforms)."""

from hypothesis import strategies as st

TEXT = st.text(st.characters(exclude_categories=()), max_size=6)  # lone surrogates included
LEAVES = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | TEXT
ANY_OBJECT = st.dictionaries(
    TEXT,
    st.recursive(
        LEAVES, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3)
    ),
    max_size=4,
)


EURO = st.just("EUR")


def refund_shaped(currency: st.SearchStrategy[str] = EURO) -> st.SearchStrategy[dict[str, object]]:
    """A refund's arguments, its order id any text: what gets past a schema to the canonical form."""
    return st.fixed_dictionaries({"order_id": TEXT, "amount": st.just(5), "currency": currency})
