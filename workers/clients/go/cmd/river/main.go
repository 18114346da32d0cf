// River (github.com/riverqueue/river v0.51.2, the pgx v5 driver) through the worker contract
// (docs/reference/contract.md); the Python side is adapters/river.py.
//
// What runs is River's own code, configured as its README and docs run it: a pgxpool and
// riverpgxv5.New(pool), river.NewClient with one queue (QueueDefault, MaxWorkers 100, the README's
// figure), its documented defaults for JobTimeout, RescueStuckJobsAfter, FetchPollInterval and
// FetchCooldown -- in the ratios adapters/river.py's TIMING keeps to the schedule's lease (the
// JobTimeout) -- and Start(ctx): the producer, the leader election and, on the leader, the
// maintenance services (the rescuer, the scheduler, the cleaners). Its migrations are installed by
// rivermigrate. The worker's Work is the harness's job body, told job.Attempt.
//
// --design-option finish=transaction: river.JobCompleteTx in the body's finishing transaction, after
// its job_runs insert (job_complete_tx.go, River's "complete job within transaction"), so the row
// and the completion commit together. A job no longer running (rescued) is not completed, and no error
// says so: JobSetStateIfRunningMany returns the row updated or not (riverpgxv5
// internal/dbsqlc/river_job.sql:711-722), so the body's row commits alone.
package main

import (
	"context"
	_ "embed"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/pg-job-chaos/pgjc"
)

const kind = "pgjc"

// River's tables after its migrations (riverpgxv5/migration/main 001..008; 007 drops river_client), and the
// harness's record of what River accepted (river.sql's install).
var tables = []string{"river_job", "river_leader", "river_queue", "river_notification", "pgjc_river_finish"}

// The harness's statements (river.sql): the install's trigger and the descriptor's accepted_finishes.
//
//go:embed river.sql
var riverSQL []byte

var statements = pgjc.ParseSQL(riverSQL)

// Args are the harness's job arguments as enqueued.
type Args map[string]any

func (Args) Kind() string { return kind }

type worker struct {
	river.WorkerDefaults[Args]
	c           *pgjc.Client
	transaction bool
}

func (w *worker) Work(ctx context.Context, job *river.Job[Args]) error {
	var inFinish func(context.Context, pgx.Tx) error
	if w.transaction {
		inFinish = func(ctx context.Context, tx pgx.Tx) error {
			_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
			return err
		}
	}
	return w.c.RunJob(ctx, job.Args, job.Attempt, inFinish)
}

func pool(ctx context.Context, tracer pgx.QueryTracer, name string) (*pgxpool.Pool, error) {
	cfg, err := pgjc.PoolConfig(os.Getenv("DATABASE_URL"))
	if err != nil {
		return nil, err
	}
	cfg.ConnConfig.Tracer = tracer
	if name != "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = name
	}
	return pgxpool.NewWithConfig(ctx, cfg)
}

func version() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, d := range info.Deps {
			if d.Path == "github.com/riverqueue/river" {
				return strings.TrimPrefix(d.Version, "v")
			}
		}
	}
	return "unknown"
}

func describe() error {
	where := "from river_job where kind = '" + kind + "'"
	pgjc.Emit(map[string]any{
		"kind": "descriptor", "contract": pgjc.Contract, "system": "river", "version": version(),
		"runtime": "go " + runtime.Version(),
		"sql": map[string]string{
			"reset":   "truncate " + strings.Join(tables, ", "),
			"pending": "select count(*) " + where + " and state not in ('completed', 'cancelled', 'discarded')",
			// attempt: River's count, raised at each fetch (JobGetAvailable); a running job's lease
			// expired: running past RescueStuckJobsAfter, which the enqueue wrote into its metadata
			"final_states": "select id::text, state::text, attempt, errors[array_length(errors, 1)]->>'error', " +
				"case when state = 'running' then attempted_at + make_interval(secs => " +
				"(metadata->>'pgjc_rescue_after')::float8) < now() end " + where,
			"accepted_finishes": statements["accepted_finishes"],
		},
		"status": map[string]string{"available": "queued", "scheduled": "queued", "retryable": "queued",
			"pending": "queued", "running": "running", "completed": "done", "discarded": "dead",
			"cancelled": "dead"},
	})
	return nil
}

func install() error {
	ctx := context.Background()
	p, err := pool(ctx, nil, "")
	if err != nil {
		return err
	}
	defer p.Close()
	migrator, err := rivermigrate.New(riverpgxv5.New(p), nil)
	if err != nil {
		return err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return err
	}
	if _, err := p.Exec(ctx, statements["install"]); err != nil {
		return err
	}
	role := pgjc.WorkerRole()
	// The worker runs River's client: its producer, its election and, as leader, its maintenance
	// (rescue, schedule, clean: updates and deletes), River's functions and sequences.
	grant := fmt.Sprintf(`grant select, insert, update, delete on %s to %s;
		grant select on river_migration to %s;
		grant usage, select on all sequences in schema public to %s;
		grant execute on all functions in schema public to %s`,
		strings.Join(tables, ", "), role, role, role, role)
	if _, err := p.Exec(ctx, grant); err != nil {
		return err
	}
	pgjc.Emit(map[string]any{"kind": "installed"})
	return nil
}

func enqueue() error {
	var req struct {
		Jobs        []map[string]any   `json:"jobs"`
		MaxAttempts int                `json:"max_attempts"`
		Intervals   map[string]float64 `json:"intervals"`
	}
	if err := pgjc.ReadStdin(&req); err != nil {
		return err
	}
	ctx := context.Background()
	p, err := pool(ctx, nil, "")
	if err != nil {
		return err
	}
	defer p.Close()
	rc, err := river.NewClient(riverpgxv5.New(p), &river.Config{}) // insert-only
	if err != nil {
		return err
	}
	meta := fmt.Sprintf(`{"pgjc_rescue_after": %g}`, req.Intervals["rescue stuck jobs after"])
	params := make([]river.InsertManyParams, len(req.Jobs))
	for i, args := range req.Jobs {
		params[i] = river.InsertManyParams{Args: Args(args),
			InsertOpts: &river.InsertOpts{MaxAttempts: req.MaxAttempts, Metadata: []byte(meta)}}
	}
	res, err := rc.InsertMany(ctx, params)
	if err != nil {
		return err
	}
	ids := make([][2]any, len(res))
	for i, r := range res {
		ids[i] = [2]any{req.Jobs[i]["job"], r.Job.ID}
	}
	pgjc.Emit(map[string]any{"kind": "enqueued", "ids": ids})
	return nil
}

func work() error {
	c, err := pgjc.NewClient()
	if err != nil {
		return err
	}
	ctx := context.Background()
	p, err := pool(ctx, c.Tracer(), c.Identity+"/river") // River's own statements are strike points
	if err != nil {
		return err
	}
	defer p.Close()
	workers := river.NewWorkers()
	river.AddWorker(workers, &worker{c: c, transaction: c.Option("finish", "work") == "transaction"})
	rc, err := river.NewClient(riverpgxv5.New(p), &river.Config{
		Queues:               map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 100}},
		Workers:              workers,
		JobTimeout:           c.Interval("job timeout"),
		RescueStuckJobsAfter: c.Interval("rescue stuck jobs after"),
		FetchPollInterval:    max(c.Interval("fetch poll interval"), river.FetchPollIntervalMin),
		FetchCooldown:        max(c.Interval("fetch cooldown"), river.FetchCooldownMin),
		Logger:               slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}
	if err := rc.Start(ctx); err != nil {
		return err
	}
	poll := time.Duration(c.Spec.Seconds["poll"] * float64(time.Second))
	for c.MayDequeue() {
		time.Sleep(poll)
	}
	// the dequeue budget spent: take no more, let the running jobs finish (River's graceful stop)
	return rc.Stop(ctx)
}

func main() {
	pgjc.Main(map[string]func() error{"describe": describe, "install": install, "enqueue": enqueue, "work": work})
}
