"""Metadata filters: the compiled SQL selects exactly what the documented rules select, in both dialects."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from durable import MemoryStoreError
from durable.memory._filter import POSTGRES, compile_filter
from tests.helpers.pg import Server

FIELDS = ["a", "b", "c.d"]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**53), max_value=2**53),
    st.floats(allow_nan=False, allow_infinity=False, width=64),
    st.text(max_size=4),
)
metadata = st.fixed_dictionaries(
    {}, optional={"a": scalars, "b": scalars, "c": st.fixed_dictionaries({}, optional={"d": scalars})}
)


def lookup(meta: dict[str, Any], field: str) -> tuple[bool, Any]:
    cur: Any = meta
    for part in field.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return False, None
        cur = cur[part]
    return True, cur


def kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    return "text" if isinstance(v, str) else "number"


def equal(meta: dict[str, Any], field: str, want: Any) -> bool:
    present, got = lookup(meta, field)
    return present and kind(got) == kind(want) and got == want


def holds(meta: dict[str, Any], flt: dict[str, Any]) -> bool:
    """The reference semantics, written from the module's docstring."""
    for field, cond in flt.items():
        ops = cond if isinstance(cond, dict) else {"$eq": cond}
        for op, want in ops.items():
            if op == "$eq" and not equal(meta, field, want):
                return False
            if op == "$ne" and equal(meta, field, want):
                return False
            if op == "$in" and not any(equal(meta, field, w) for w in want):
                return False
            if op in ("$gt", "$gte", "$lt", "$lte"):
                present, got = lookup(meta, field)
                if not present or kind(got) != kind(want):
                    return False
                ok = {"$gt": got > want, "$gte": got >= want, "$lt": got < want, "$lte": got <= want}
                if not ok[op]:
                    return False
    return True


range_values = st.one_of(
    st.integers(min_value=-(2**53), max_value=2**53),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=4),
)
condition = st.one_of(
    scalars,
    st.dictionaries(st.sampled_from(["$eq", "$ne"]), scalars, min_size=1, max_size=2),
    st.dictionaries(st.sampled_from(["$gt", "$gte", "$lt", "$lte"]), range_values, min_size=1, max_size=2),
    st.builds(lambda v: {"$in": v}, st.lists(scalars, max_size=3)),
)
filters = st.dictionaries(st.sampled_from(FIELDS), condition, max_size=3)


@settings(max_examples=150, deadline=None)
@given(st.lists(metadata, min_size=1, max_size=8), filters)
def test_compiled_filter_selects_what_the_rules_say(metas: list[dict[str, Any]], flt: dict[str, Any]) -> None:
    """For any metadata and any filter, SQLite selects exactly the items the rules match."""
    sql, params = compile_filter(flt)
    with sqlite3.connect(":memory:") as db:
        db.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, metadata TEXT)")
        db.executemany("INSERT INTO items VALUES (?, ?)", [(i, json.dumps(m)) for i, m in enumerate(metas)])
        got = {r[0] for r in db.execute(f"SELECT id FROM items WHERE {sql}", params)}
    db.close()
    assert got == {i for i, m in enumerate(metas) if holds(m, flt)}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(metas=st.lists(metadata, min_size=1, max_size=8), flt=filters)
def test_compiled_filter_selects_the_same_in_postgres(
    pg_server: Server, metas: list[dict[str, Any]], flt: dict[str, Any]
) -> None:
    """The PostgreSQL dialect, over metadata text read as jsonb, selects exactly the items the rules match."""
    import psycopg

    assume("\\u0000" not in json.dumps([metas, flt]))  # PostgreSQL's text and jsonb cannot hold U+0000
    sql, params = compile_filter(flt, "metadata::jsonb", POSTGRES)
    with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
        rows = conn.execute(
            f"SELECT id FROM (SELECT (e ->> 0)::int AS id, e ->> 1 AS metadata "
            f"FROM jsonb_array_elements(%s::jsonb) AS e) AS items WHERE {sql}",
            [json.dumps([[i, json.dumps(m)] for i, m in enumerate(metas)]), *params],
        ).fetchall()
    assert {r[0] for r in rows} == {i for i, m in enumerate(metas) if holds(m, flt)}


def test_empty_filter_matches_everything() -> None:
    """None and {} compile to a condition that is always true."""
    assert compile_filter(None) == ("1", []) == compile_filter({})


@pytest.mark.parametrize(
    ("flt", "message"),
    [
        ({"a": {"$regex": "x"}}, "unknown operator '\\$regex'"),
        ({"a": {"$gt": True}}, "needs a number or a string"),
        ({"a": {"$in": "abc"}}, "takes a list"),
        ({"a": [1, 2]}, "filter values are strings, finite numbers"),
        ({"a": {"$lt": float("inf")}}, "finite numbers"),
        ({"a": {"$in": [float("nan")]}}, "finite numbers"),
        ({"": 1}, "not usable"),
        ({"a..b": 1}, "not usable"),
        ({"a": {}}, "empty condition"),
    ],
)
def test_bad_filters_are_refused_with_what_is_allowed(flt: dict[str, Any], message: str) -> None:
    """Each malformed filter raises MemoryStoreError saying what is wrong."""
    with pytest.raises(MemoryStoreError, match=message):
        compile_filter(flt)
