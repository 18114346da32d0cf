"""The article's designs, built in: ``base`` (what they share), ``lease``, ``one_transaction``,
``heartbeat``, ``outbox`` and ``fair``, each with its SQL beside it (``queue.sql`` is the queue
they share). They stand on the job body (``workers/body/``) and never import the hosting
(``workers/hosted/``); the loader (``workers/loading.py``) names them.
"""
