-- The tenant experiments (harness/experiments/tenants.py). The job itself uses workers/body/body.sql
-- (set_tenant, read_invoices); these are the borrower's count, the failure and the timed query.

-- name: count_invoices
-- The next borrower sets nothing and counts: whatever it sees was left behind.
select count(*) from pgjc.invoices;

-- name: fail
-- The sql-error fault's statement: the job fails after it has set its tenant.
select 1/0;

-- name: timed_query
-- The reset-cost job's one query: one of the tenant's invoices, through the tenant index.
select id, amount from pgjc.invoices where tenant_id = %(tenant)s limit 1;
