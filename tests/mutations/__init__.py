"""Rule mutations: does the suite catch a broken rule? (issue 18)

``python -m tests.mutations`` applies each mutation of :mod:`tests.mutations.catalogue` to a
temporary copy of the tree and runs the tests named for it; it exits non-zero when a mutation
survives, a snippet is missing, or the unmutated baseline fails. See ``__main__`` for options.
"""
