"""The job body and what it runs in: one execution's steps (``execution.py``), the statement wrapper
that makes every statement a strike point and tracks the tenant setting (``statements.py``), and the
worker context a design's loop gets (``context.py``). Every design, built in or hosted, runs its jobs
through these.

Hazard: the body's SQL file is ``body.sql``, not ``execution.sql``: a statement's point is named after
its file's stem (``sql:commit:body.finish_run:after``), and saved schedules name those points.
"""
