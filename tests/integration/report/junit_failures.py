# -*- coding: utf-8 -*-
"""Print why a molecule scenario failed, for the end of the run: the failed and erroring tests of a pytest JUnit XML
file (argv[1]), each with the end of its message, then Ansible's "fatal:" lines from molecule's log (argv[2], optional).

molecule-test (beside it) calls it when a scenario fails: molecule's destroy prints after the failing step, so without
this the tail of the run (all that CI's report keeps) would not say which test or task failed, or why."""
import sys
import xml.etree.ElementTree as ET

LINES = 25  # of each failure's text: the assertion and the values it printed, not the whole traceback


def fatal_lines(log):
    """Ansible's task failures in molecule's output, each cut short: a failed command's result is one long line."""
    try:
        with open(log, encoding="utf-8", errors="replace") as f:
            lines = [line.rstrip() for line in f if line.startswith(("fatal:", "failed:"))]
    except OSError:
        return
    for line in lines[-10:]:
        print("ANSIBLE " + line[:1500])


def main(path):
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as err:
        print("no test report at %s (%s): the suite did not run to its end" % (path, err))
        return
    count = 0
    for case in root.iter("testcase"):
        for outcome in ("failure", "error"):
            for element in case.findall(outcome):
                count += 1
                print("%s %s::%s" % (outcome.upper(), case.get("classname"), case.get("name")))
                text = (element.text or element.get("message") or "").rstrip().splitlines()
                for line in text[-LINES:]:
                    print("    " + line[:400])
    print("%d failed or erroring test(s) in %s" % (count, path))


if __name__ == "__main__":
    main(sys.argv[1])
    if len(sys.argv) > 2:
        fatal_lines(sys.argv[2])
