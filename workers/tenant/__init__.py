"""Tenant context on pooled connections: the tenant modes, how a worker sets and clears the tenant
on a connection it borrows (``modes.py``), and the setting tracked per connection from the
statements that change it (``track.py``). The lowest part of ``workers/``: it imports only ``core``.
"""
