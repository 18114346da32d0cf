// The reference queue (examples/contract/queue.sql) as a contract client in Go: the same queue as
// examples/contract/worker.py and worker.js.
//
//	pg-job-chaos search --design contract --design-option command="BINARY examples/contract/queue.sql"
//
// The command's first word after the binary is the queue.sql file; the harness appends the
// subcommand. Build: go build -o BINARY ./cmd/reference (workers/clients/go).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pg-job-chaos/pgjc"
)

var sql map[string]string

func connect(ctx context.Context) (*pgx.Conn, error) {
	cfg, err := pgjc.ConnConfig(os.Getenv("DATABASE_URL"))
	if err != nil {
		return nil, err
	}
	return pgx.ConnectConfig(ctx, cfg)
}

func exec(ctx context.Context, conn *pgx.Conn, name string, params map[string]any) error {
	t, v := pgjc.Bind(sql[name], params)
	_, err := conn.Exec(ctx, t, v...)
	return err
}

func describe() error {
	pgjc.Emit(map[string]any{"kind": "descriptor", "contract": pgjc.Contract, "system": "contract-reference-go",
		"version": "1", "runtime": "go " + runtime.Version(),
		"sql":    map[string]string{"reset": sql["reset"], "pending": sql["pending"], "final_states": sql["final_states"]},
		"status": map[string]string{"queued": "queued", "running": "running", "done": "done", "failed": "dead"}})
	return nil
}

func install() error {
	ctx := context.Background()
	conn, err := connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	role := pgjc.WorkerRole()
	if _, err := conn.Exec(ctx, sql["install"]); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, strings.ReplaceAll(sql["grant"], "{role}", role)); err != nil {
		return err
	}
	pgjc.Emit(map[string]any{"kind": "installed"})
	return nil
}

func enqueue() error {
	var req struct {
		Jobs        []map[string]any `json:"jobs"`
		MaxAttempts int              `json:"max_attempts"`
	}
	if err := pgjc.ReadStdin(&req); err != nil {
		return err
	}
	ctx := context.Background()
	conn, err := connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	ids := [][2]any{}
	for _, args := range req.Jobs {
		b, _ := json.Marshal(args)
		t, v := pgjc.Bind(sql["enqueue"], map[string]any{"args": string(b), "max_attempts": req.MaxAttempts})
		var id int64
		if err := conn.QueryRow(ctx, t, v...).Scan(&id); err != nil {
			return err
		}
		ids = append(ids, [2]any{args["job"], id})
	}
	pgjc.Emit(map[string]any{"kind": "enqueued", "ids": ids})
	return nil
}

func work() error {
	client, err := pgjc.NewClient()
	if err != nil {
		return err
	}
	ctx := context.Background()
	cfg, err := pgjc.ConnConfig(os.Getenv("DATABASE_URL"))
	if err != nil {
		return err
	}
	cfg.RuntimeParams["application_name"] = client.Identity + "/queue"
	cfg.Tracer = client.Tracer() // the queue's own statements are strike points too
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	lease, poll := client.Spec.Seconds["lease"], client.Spec.Seconds["poll"]
	for client.MayDequeue() {
		t, v := pgjc.Bind(sql["claim"], map[string]any{"lease": lease})
		var id int64
		var args map[string]any
		var attempts int
		err := conn.QueryRow(ctx, t, v...).Scan(&id, &args, &attempts)
		if err == pgx.ErrNoRows {
			time.Sleep(time.Duration(poll * float64(time.Second)))
			continue
		} else if err != nil {
			return err
		}
		if err := client.RunJob(ctx, args, attempts, nil); err != nil {
			if err := exec(ctx, conn, "fail", map[string]any{"id": id, "error": fmt.Sprintf("%T: %v", err, err)}); err != nil {
				return err
			}
		} else if err := exec(ctx, conn, "finish", map[string]any{"id": id}); err != nil {
			return err
		}
	}
	return nil
}

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintf(os.Stderr, "usage: %s QUEUE.sql {describe|install|enqueue|work}\n", os.Args[0])
		os.Exit(2)
	}
	var err error
	if sql, err = pgjc.LoadSQL(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	pgjc.Main(map[string]func() error{"describe": describe, "install": install, "enqueue": enqueue, "work": work})
}
