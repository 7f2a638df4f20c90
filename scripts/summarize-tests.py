#!/usr/bin/env python3
"""Prints one summary line from ctest's JUnit file and lit's xunit file.

ctest sees lit as one test; lit's own file says how each lit test did, so the
line counts lit tests and ctest's other tests (GoogleTest cases, runtime
checks) separately. Skipped tests (no GPU, for instance) are counted visibly.
"""

import sys
import xml.etree.ElementTree as ET


def count(cases):
    passed = failed = skipped = 0
    for case in cases:
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
        elif case.find("skipped") is not None or case.get("status") == "notrun":
            skipped += 1
        else:
            passed += 1
    return passed, failed, skipped


def main(ctest_xml, lit_xml):
    try:
        ctest_cases = [c for c in ET.parse(ctest_xml).getroot().iter("testcase")
                       if c.get("name") != "lit"]
    except (OSError, ET.ParseError) as error:
        print(f"summary: cannot read ctest results {ctest_xml}: {error}")
        return 1
    try:
        lit_cases = list(ET.parse(lit_xml).getroot().iter("testcase"))
    except (OSError, ET.ParseError) as error:
        print(f"summary: cannot read lit results {lit_xml}: {error}")
        return 1
    lp, lf, ls = count(lit_cases)
    up, uf, us = count(ctest_cases)
    print(f"summary: {lp + up} passed, {lf + uf} failed, {ls + us} skipped "
          f"(lit: {lp} passed, {lf} failed, {ls} skipped; "
          f"unit/ctest: {up} passed, {uf} failed, {us} skipped)")
    return 0 if lf + uf == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
