#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""rdma-core's own pyverbs tests (python3-pyverbs ships them as /usr/share/doc/rdma-core/tests)
for riw_pyverbs.sh:

  pyverbs_tests.py unpack DIR          copy the tests into DIR/tests, gunzipping what Debian
                                       compressed; prints DIR/tests
  pyverbs_tests.py list TESTS          the test ids run_tests.py would run, one a line
  pyverbs_tests.py run TESTS RESULTS [run_tests.py's arguments...]
                                       what run_tests.py does, and one line
                                       "STATUS<TAB>ID<TAB>REASON" per test appended to RESULTS
                                       (STATUS pass, fail, error, skip, xfail, xpass)
  pyverbs_tests.py compare SIW RIW TESTS
                                       one line "STATUS<TAB>ID<TAB>RIW<TAB>SIW<TAB>REASON" per
                                       test id of `list`, STATUS being the verdict on riw:
                                       pass, fail, skip (both skipped) or xfail (both failed);
                                       REASON is riw's, or siw's for xfail

A test passing on siw must pass on riw; one skipping on siw may skip on riw; one failing on siw
too is siw's (or the test's) own failure on iWARP. Ids are printed without the leading
"tests.".
"""

import gzip
import os
import shutil
import sys

DOC_TESTS = '/usr/share/doc/rdma-core/tests'

# Outcomes, best first: riw must do at least as well as siw.
RANK = {'pass': 3, 'xfail': 3, 'skip': 2, 'fail': 1, 'error': 1, 'xpass': 1, 'none': 0}


def short(test_id):
    return test_id[len('tests.'):] if test_id.startswith('tests.') else test_id


def one_line(text, limit=160):
    text = ' '.join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + '...'


def unpack(dest):
    tests = os.path.join(dest, 'tests')
    shutil.copytree(DOC_TESTS, tests)
    for name in os.listdir(tests):
        if name.endswith('.gz'):
            path = os.path.join(tests, name)
            with gzip.open(path, 'rb') as src, open(path[:-3], 'wb') as dst:
                shutil.copyfileobj(src, dst)
            os.unlink(path)
    print(tests)


def load(tests_dir, argv):
    """Imports the tests as run_tests.py does, with argv as its command line."""
    from importlib.machinery import SourceFileLoader
    sys.path.insert(0, tests_dir)
    sys.argv[1:] = argv
    from args_parser import parser
    parser.parse_args()
    return SourceFileLoader('tests', os.path.join(tests_dir, '__init__.py')).load_module()


def test_ids(tests_dir):
    import unittest
    tests = load(tests_dir, [])
    ids = []

    def walk(suite):
        for t in suite:
            if isinstance(t, unittest.TestSuite):
                walk(t)
            else:
                ids.append(t.id())
    walk(unittest.defaultTestLoader.loadTestsFromModule(tests))
    return ids


def same_draws():
    """The tests draw QP capabilities, creation flags and more at random, within the device's
    limits, which differ between riw and siw. Seeded by the test's id and with every draw
    taking one random() whatever its range, a test makes the same choices (creation flags
    or not, say) on both devices, so that their outcomes compare."""
    import random
    inst = random._inst
    inst._randbelow = lambda n: min(int(inst.random() * n), n - 1)
    return random.seed


def run(tests_dir, results, argv):
    import unittest
    tests = load(tests_dir, argv)
    seed = same_draws()
    out = open(results, 'a', buffering=1)

    def record(status, test, reason=''):
        out.write(f'{status}\t{short(test.id())}\t{one_line(reason)}\n')

    class Result(unittest.TextTestResult):
        def startTest(self, test):
            seed(test.id())
            super().startTest(test)

        def addSuccess(self, test):
            super().addSuccess(test)
            record('pass', test)

        def addFailure(self, test, err):
            super().addFailure(test, err)
            record('fail', test, f'{err[0].__name__}: {err[1]}')

        def addError(self, test, err):
            super().addError(test, err)
            record('error', test, f'{err[0].__name__}: {err[1]}')

        def addSkip(self, test, reason):
            super().addSkip(test, reason)
            record('skip', test, reason)

        def addExpectedFailure(self, test, err):
            super().addExpectedFailure(test, err)
            record('xfail', test, f'{err[0].__name__}: {err[1]}')

        def addUnexpectedSuccess(self, test):
            super().addUnexpectedSuccess(test)
            record('xpass', test, 'unexpected success')

    runner = unittest.TextTestRunner(resultclass=Result, verbosity=1, stream=sys.stdout)
    prog = unittest.main(module=tests, testRunner=runner, exit=False)
    return 0 if prog.result.wasSuccessful() else 1


def read_results(path):
    res = {}
    try:
        with open(path) as f:
            for line in f:
                parts = line.rstrip('\n').split('\t')
                if len(parts) == 3:
                    res[parts[1]] = (parts[0], parts[2])
    except FileNotFoundError:
        pass
    return res


def compare(siw_path, riw_path, tests_dir):
    siw, riw = read_results(siw_path), read_results(riw_path)
    for tid in map(short, test_ids(tests_dir)):
        r, rwhy = riw.get(tid, ('none', 'no result'))
        s, swhy = siw.get(tid, ('none', 'no result'))
        if r == 'none' or RANK[r] < RANK[s]:
            verdict, why = 'fail', rwhy
        elif r in ('fail', 'error', 'xpass'):
            verdict, why = 'xfail', swhy
        elif r == 'skip':
            verdict, why = 'skip', rwhy + ('' if s == 'skip' else f' (siw {s})')
        else:
            verdict, why = 'pass', ''
        print(f'{verdict}\t{tid}\t{r}\t{s}\t{one_line(why, 200)}')


def main():
    cmd = sys.argv[1] if len(sys.argv) > 1 else ''
    if cmd == 'unpack' and len(sys.argv) == 3:
        unpack(sys.argv[2])
    elif cmd == 'list' and len(sys.argv) == 3:
        for tid in test_ids(sys.argv[2]):
            print(short(tid))
    elif cmd == 'run' and len(sys.argv) >= 4:
        sys.exit(run(sys.argv[2], sys.argv[3], sys.argv[4:]))
    elif cmd == 'compare' and len(sys.argv) == 5:
        compare(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == '__main__':
    main()
