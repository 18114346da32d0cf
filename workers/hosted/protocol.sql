-- The schedule's job ids and the ids a hosted library gave them (workers/hosted/protocol.py).

-- name: record_id
insert into pgjc.job_map (job_id, library_id) values (%(job)s, %(library_id)s);

-- name: schedule_ids
select job_id, library_id from pgjc.job_map;
