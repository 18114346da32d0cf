"""Adapters: real queue libraries hosted under the harness (protocol v2, ``workers/hosted/protocol.py``).

One module per library, each needing its library (``pip install -e '.[libraries]'``): the library's
own worker loop, claim SQL, retry policy, finish, heartbeats and the stalled-job recovery its
documentation recommends -- configured as documented, never improved -- with its task calling the
harness's job body. ``--design NAME`` names them (``workers.loading.LIBRARIES``: nine, with the
worker contract's clients for the Node and Python 3.12 ones).
"""
