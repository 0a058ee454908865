"""Enrichment with a hash join: orders joined with their customers and products.

The two small tables (customers, products) are *build sides*: each is sent
in full to every processor of the join (broadcast, consumed first thanks to
edge priority); the large stream of orders is the *probe side* and stays
local. Orders of unknown customers keep ``None`` (an outer join, Jet's
``hashJoin``).

Run it with ``python examples/enrichment_join.py``, or submit it to a
cluster with ``jetlet submit examples/enrichment_join.py`` and read the
result with ``jetlet get-map revenue``.
"""

from __future__ import annotations

import random
import sys

import jetlet
from jetlet.aggregate import summing
from jetlet.pipeline import JoinClause, Pipeline, Sinks, Sources

CUSTOMERS = [(cid, name) for cid, name in enumerate(["Ada", "Grace", "Edsger", "Barbara", "Donald"])]
PRODUCTS = [(pid, name, price) for pid, (name, price) in enumerate([("pen", 2), ("book", 15), ("lamp", 40)])]


def orders(count: int = 50_000) -> list[tuple[int, int, int, int]]:
    """``(order_id, customer_id, product_id, quantity)``; customer 9 does not exist."""
    rng = random.Random(11)
    return [
        (oid, rng.choice([0, 1, 2, 3, 4, 9]), rng.randrange(3), rng.randrange(1, 5)) for oid in range(count)
    ]


def build_pipeline(order_list: list[tuple[int, int, int, int]] | None = None) -> Pipeline:
    """Revenue per customer of ``order_list`` (default: :func:`orders`)."""
    if order_list is None:
        order_list = orders()
    p = Pipeline()
    customers = p.read_from(Sources.from_iterable(CUSTOMERS, name="customers"))
    products = p.read_from(Sources.from_iterable(PRODUCTS, name="products"))
    enriched = p.read_from(Sources.from_iterable(order_list, name="orders")).hash_join2(
        customers,
        JoinClause.on_keys(lambda order: order[1], lambda customer: customer[0]).project_right(
            lambda c: c[1]
        ),
        products,
        JoinClause.on_keys(lambda order: order[2], lambda product: product[0]),
        lambda order, customer, product: (customer or "unknown", order[3] * product[2]),
    )
    enriched.grouping_key(lambda sale: sale[0]).aggregate(summing(lambda sale: sale[1])).write_to(
        Sinks.map("revenue")
    )
    return p


def main() -> int:
    order_list = orders()
    with jetlet.embedded() as jet:
        jet.new_job(build_pipeline(order_list)).join()
        revenue = dict(jet.get_map("revenue"))
    for customer, total in sorted(revenue.items(), key=lambda e: -e[1]):
        print(f"{customer:<10}{total:>10,}")
    names, prices = dict(CUSTOMERS), {pid: price for pid, _, price in PRODUCTS}
    expected: dict[str, int] = {}
    for _, cid, pid, quantity in order_list:
        name = names.get(cid, "unknown")
        expected[name] = expected.get(name, 0) + quantity * prices[pid]
    print(
        "\nrevenue per customer", "matches" if revenue == expected else "DIFFERS FROM", "a plain-Python join"
    )
    return 0 if revenue == expected else 1


if __name__ == "__main__":
    sys.exit(main())
