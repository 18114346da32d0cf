package pgjc

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A server that accepts and never answers: a connect to it lasts until the DSN's connect_timeout.
func silentServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	return ln.Addr().String()
}

func testClient(t *testing.T, dsn string) *Client {
	log, err := os.Create(filepath.Join(t.TempDir(), "w.events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	return &Client{DSN: dsn, Identity: "w1.0", log: log, seen: map[string]bool{},
		slots: make(chan struct{}, 1)}
}

// Borrow waits under the job's context, as pgxpool's Acquire does, but the connect it waits for is the
// pool's: not cancelled with the job (its slot stays taken until the connect ends, here at the DSN's
// connect_timeout).
func TestBorrowGivesUpWithTheJobButNotTheConnect(t *testing.T) {
	c := testClient(t, "postgresql://u@"+silentServer(t)+"/d?connect_timeout=1&sslmode=disable")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	begin := time.Now()
	conn, err := c.Borrow(ctx)
	if conn != nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Borrow = %v, %v; want the job's deadline", conn, err)
	}
	if waited := time.Since(begin); waited > 700*time.Millisecond {
		t.Fatalf("Borrow returned after %v, not at the job's deadline", waited)
	}
	if len(c.slots) != 1 {
		t.Fatalf("the connect's slot was given back while it still ran (%d taken)", len(c.slots))
	}
	for deadline := time.Now().Add(5 * time.Second); len(c.slots) != 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the failed connect never gave its slot back")
		}
	}
	done, stop := context.WithCancel(context.Background())
	stop()
	if _, err := c.Borrow(done); !errors.Is(err, context.Canceled) || len(c.slots) != 0 {
		t.Fatalf("Borrow on a job already done = %v (%d slots taken); want its error and no slot", err, len(c.slots))
	}
}
