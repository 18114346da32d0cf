"""The job body and what it runs in: one execution's steps (``execution.py``, its SQL in
``execution.sql``), the statement wrapper that makes every statement a strike point and tracks the
tenant setting (``statements.py``), and the worker context a design's loop gets (``context.py``).
Every design, built in or hosted, runs its jobs through these.
"""
