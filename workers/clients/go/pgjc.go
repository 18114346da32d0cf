// Package pgjc is the worker contract's Go client (pgx v5), version 1: the same contract as
// workers/clients/python/pgjc_contract.py and workers/clients/node/pgjc-contract.js
// (docs/reference/contract.md is the specification): the subcommands describe | install | enqueue |
// work, the execution log's records (one write per line on an O_APPEND descriptor), the harness's
// job body, and the wait at a watched point for the supervisor's go -- SIGUSR1, received on a
// channel (never a busy loop; the queue's other goroutines run on meanwhile).
//
// Statement points: Client.Tracer is a pgx.QueryTracer; a queue's pool configured with it
// (ConnConfig.Tracer) makes every statement the queue sends through pgx's Query, QueryRow or Exec a
// strike point, held in TraceQueryStart before pgx writes it. Batches (SendBatch) and CopyFrom are
// not held: pgx traces them through other interfaces, after their statements are queued.
package pgjc

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

const (
	Contract  = 1
	EnvSpec   = "PGJC_CONTRACT"
	ExitCrash = 1
)

// bodyTexts are the body's transaction control and clock read: never strike points.
var bodyTexts = map[string]bool{"select clock_timestamp()": true, "begin": true, "commit": true,
	"rollback": true, "": true, "-- ping": true}

// Digest is a statement's strike point: "sql:" and 8 hex digits of the SHA-1 of its
// whitespace-collapsed text (the harness names the same text the same way).
func Digest(text string) string {
	sum := sha1.Sum([]byte(strings.Join(strings.Fields(text), " ")))
	return "sql:" + hex.EncodeToString(sum[:])[:8]
}

var placeholder = regexp.MustCompile(`%\((\w+)\)s`)

// Bind rewrites %(name)s placeholders (the harness's SQL) as $n and returns the values in that order.
func Bind(text string, params map[string]any) (string, []any) {
	var names []string
	out := placeholder.ReplaceAllStringFunc(text, func(m string) string {
		name := placeholder.FindStringSubmatch(m)[1]
		for i, n := range names {
			if n == name {
				return fmt.Sprintf("$%d", i+1)
			}
		}
		names = append(names, name)
		return fmt.Sprintf("$%d", len(names))
	})
	values := make([]any, len(names))
	for i, n := range names {
		values[i] = params[n]
	}
	return out, values
}

// libpqOnly are the libpq URL parameters pgx does not read (it would send them as run-time
// parameters, which the server refuses): hostaddr becomes the host, keepalives* pgx's dialer's.
var libpqOnly = []string{"hostaddr", "keepalives", "keepalives_idle", "keepalives_interval",
	"keepalives_count", "tcp_user_timeout"}

// DSN is dsn without the libpq-only parameters, and the TCP keepalive they asked for (nil: pgx's).
// A multi-host URL (host:port,host:port, which url.Parse refuses) keeps its hosts as they are.
func DSN(dsn string) (string, *net.KeepAliveConfig) {
	base, query, found := strings.Cut(dsn, "?")
	if !found {
		return dsn, nil
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return dsn, nil
	}
	if addr := q.Get("hostaddr"); addr != "" {
		if u, err := url.Parse(base); err == nil && !strings.Contains(u.Host, ",") {
			if port := u.Port(); port != "" {
				u.Host = net.JoinHostPort(addr, port)
			} else {
				u.Host = addr
			}
			base = u.String()
		}
	}
	var ka *net.KeepAliveConfig
	seconds := func(name string) time.Duration {
		n, _ := strconv.Atoi(q.Get(name))
		return time.Duration(n) * time.Second
	}
	if q.Get("keepalives") != "0" && (q.Has("keepalives_idle") || q.Has("keepalives_interval")) {
		count, _ := strconv.Atoi(q.Get("keepalives_count"))
		ka = &net.KeepAliveConfig{Enable: true, Idle: seconds("keepalives_idle"),
			Interval: seconds("keepalives_interval"), Count: count}
	}
	for _, k := range libpqOnly {
		q.Del(k)
	}
	if len(q) == 0 {
		return base, ka
	}
	return base + "?" + q.Encode(), ka
}

// ConnConfig parses dsn for pgx (DSN): a body's, a queue's own connection.
func ConnConfig(dsn string) (*pgx.ConnConfig, error) {
	clean, ka := DSN(dsn)
	cfg, err := pgx.ParseConfig(clean)
	if err == nil && ka != nil {
		dialer := &net.Dialer{KeepAliveConfig: *ka}
		cfg.DialFunc = dialer.DialContext
	}
	return cfg, err
}

// PoolConfig parses dsn for pgxpool (DSN): a queue's pool.
func PoolConfig(dsn string) (*pgxpool.Config, error) {
	clean, ka := DSN(dsn)
	cfg, err := pgxpool.ParseConfig(clean)
	if err == nil && ka != nil {
		dialer := &net.Dialer{KeepAliveConfig: *ka}
		cfg.ConnConfig.DialFunc = dialer.DialContext
	}
	return cfg, err
}

// Emit writes one answer line on stdout.
// WorkerRole is the harness's worker role (PGJC_WORKER_ROLE) quoted as an SQL identifier, for the grants
// an install sends: pgx's own quoting, not a hand-written one.
func WorkerRole() string {
	return pgx.Identifier{os.Getenv("PGJC_WORKER_ROLE")}.Sanitize()
}

func Emit(record any) {
	b, _ := json.Marshal(record)
	os.Stdout.Write(append(b, '\n'))
}

// ReadStdin decodes a subcommand's JSON input.
func ReadStdin(into any) error {
	return json.NewDecoder(os.Stdin).Decode(into)
}

// LoadSQL reads the statements of a .sql file, each after a "-- name: NAME" line (comments dropped).
func LoadSQL(file string) (map[string]string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return ParseSQL(data), nil
}

// ParseSQL is LoadSQL of a file's contents (a command's embedded .sql).
func ParseSQL(data []byte) map[string]string {
	out := map[string]string{}
	var name string
	var lines []string
	flush := func() {
		if name != "" {
			out[name] = strings.TrimSuffix(strings.TrimSpace(strings.Join(lines, "\n")), ";")
		}
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "-- name:") {
			flush()
			name, lines = strings.TrimSpace(line[len("-- name:"):]), nil
		} else if name != "" && !strings.HasPrefix(strings.TrimLeft(line, " \t"), "--") {
			lines = append(lines, line)
		}
	}
	flush()
	return out
}

// Main dispatches os.Args[1] to commands[name]; an unknown subcommand exits 2 naming the known ones,
// an error exits 70.
func Main(commands map[string]func() error) {
	name := ""
	if len(os.Args) > 1 {
		name = os.Args[len(os.Args)-1] // the harness appends the subcommand to the command's words
	}
	cmd, ok := commands[name]
	if !ok {
		known := make([]string, 0, len(commands))
		for k := range commands {
			known = append(known, k)
		}
		fmt.Fprintf(os.Stderr, "usage: %s {%s}\n", os.Args[0], strings.Join(known, "|"))
		os.Exit(2)
	}
	if err := cmd(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(70)
	}
	os.Exit(0)
}

// Spec is the spec file of `work` (docs/reference/contract.md, "The spec file").
type Spec struct {
	Contract    int                `json:"contract"`
	Identity    string             `json:"identity"`
	Log         string             `json:"log"`
	RunDir      string             `json:"run_dir"`
	DSN         string             `json:"dsn"`
	Watch       [][2]any           `json:"watch"`
	StrikeWait  float64            `json:"strike_wait"`
	TimeScale   float64            `json:"time_scale"`
	Seconds     map[string]float64 `json:"seconds"`
	Intervals   map[string]float64 `json:"intervals"`
	Options     map[string]string  `json:"options"`
	Tenant      TenantSpec         `json:"tenant"`
	Dequeues    *int               `json:"dequeues"`
	PoolSize    int                `json:"pool_size"`
	MaxAttempts int                `json:"max_attempts"`
	SQL         map[string]string  `json:"sql"`
	Faults      map[string]Fault   `json:"faults"`
}

type TenantSpec struct {
	Mode       string  `json:"mode"`
	Local      bool    `json:"local"`
	Autocommit bool    `json:"autocommit"`
	Reset      *string `json:"reset"`
}

type Fault struct {
	Point           *string  `json:"point"`
	Strike          *string  `json:"strike"`
	WorkLeaseFactor *float64 `json:"work_lease_factor"`
}

// InjectedError is the body's raise fault.
type InjectedError struct{ msg string }

func (e *InjectedError) Error() string { return e.msg }

// Client is one worker process's side of the contract: its log, its points, its body pool.
type Client struct {
	Spec     Spec
	Identity string
	DSN      string
	watch    map[string]bool

	mu      sync.Mutex // the log's seen set, started, job/attempt
	log     *os.File
	seen    map[string]bool
	started int
	job     *int64 // the job this process last started: a statement after it belongs to it
	attempt int

	waitMu sync.Mutex // one waiter at a time: the go is process-wide
	gos    chan os.Signal

	// A deploy's SIGTERM (forwarded by the forked worker): take no more jobs; the command's own stop
	// (River's Client.Stop) follows once MayDequeue says so. Without it Go's default action ends the
	// process at once and the system's graceful stop never runs.
	terminating atomic.Bool

	poolMu sync.Mutex
	free   []*pgx.Conn
	slots  chan struct{} // pool_size tokens
}

// NewClient reads the spec file PGJC_CONTRACT names and writes client-start.
func NewClient() (*Client, error) {
	file := os.Getenv(EnvSpec)
	if file == "" {
		return nil, fmt.Errorf("pgjc: %s is not set (run by pg-job-chaos's contract design)", EnvSpec)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	c := &Client{seen: map[string]bool{}, watch: map[string]bool{}, gos: make(chan os.Signal, 1)}
	if err := json.Unmarshal(data, &c.Spec); err != nil {
		return nil, fmt.Errorf("pgjc: spec %s: %w", file, err)
	}
	if c.Spec.Contract != Contract {
		return nil, fmt.Errorf("pgjc: contract %d; this client speaks %d", c.Spec.Contract, Contract)
	}
	c.Identity, c.DSN = c.Spec.Identity, c.Spec.DSN
	for _, w := range c.Spec.Watch {
		c.watch[watchKey(w[0], fmt.Sprint(w[1]))] = true
	}
	size := max(c.Spec.PoolSize, 1)
	c.slots = make(chan struct{}, size)
	if c.log, err = os.OpenFile(c.Spec.Log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); err != nil {
		return nil, err
	}
	signal.Notify(c.gos, syscall.SIGUSR1)
	terms := make(chan os.Signal, 1)
	signal.Notify(terms, syscall.SIGTERM)
	go func() {
		for range terms {
			c.terminating.Store(true)
		}
	}()
	// The forked worker asked the kernel to kill us with it; a parent gone all the same ends us too.
	parent := os.Getppid()
	go func() {
		for range time.Tick(500 * time.Millisecond) {
			if os.Getppid() != parent {
				os.Exit(70)
			}
		}
	}()
	c.Log("client-start", map[string]any{"runtime": "go " + runtime.Version(), "contract": Contract})
	return c, nil
}

func watchKey(job any, point string) string {
	switch j := job.(type) {
	case nil:
		return "null " + point
	case float64:
		return fmt.Sprintf("%d %s", int64(j), point)
	case *int64:
		if j == nil {
			return "null " + point
		}
		return fmt.Sprintf("%d %s", *j, point)
	default:
		return fmt.Sprintf("%v %s", j, point)
	}
}

// monotonic reads CLOCK_MONOTONIC, comparable with the harness's time.monotonic().
func monotonic() float64 {
	var ts syscall.Timespec
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 1, uintptr(unsafe.Pointer(&ts)), 0)
	return float64(ts.Sec) + float64(ts.Nsec)/1e9
}

// Log appends one record to the execution log in a single write.
func (c *Client) Log(event string, fields map[string]any) {
	rec := map[string]any{"t": monotonic(), "wall": float64(time.Now().UnixNano()) / 1e9,
		"worker": c.Identity, "pid": os.Getpid(), "event": event}
	for k, v := range fields {
		rec[k] = v
	}
	b, _ := json.Marshal(rec)
	c.log.Write(append(b, '\n'))
}

// Wait is the wait at a watched point: say so, and wait for the go (at most strike_wait seconds).
func (c *Client) Wait(job any, attempt any, point string, backend uint32) {
	c.waitMu.Lock()
	defer c.waitMu.Unlock()
	select { // a go that came after an earlier wait timed out is not this one's
	case <-c.gos:
	default:
	}
	c.Log("point", map[string]any{"job": job, "attempt": attempt, "point": point, "backend": backend})
	select {
	case <-c.gos:
	case <-time.After(time.Duration(c.Spec.StrikeWait * float64(time.Second))):
		c.Log("point-timeout", map[string]any{"job": job, "attempt": attempt, "point": point})
	}
}

// MayDequeue says whether the worker may take another job: not after a deploy's SIGTERM, nor past the
// schedule's dequeue budget.
func (c *Client) MayDequeue() bool {
	if c.terminating.Load() {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Spec.Dequeues == nil || c.started < *c.Spec.Dequeues
}

// Options returns a design option's value, or def.
func (c *Client) Option(name, def string) string {
	if v, ok := c.Spec.Options[name]; ok && v != "" {
		return v
	}
	return def
}

// Interval is one of the queue's own intervals (spec "intervals"), as a duration.
func (c *Client) Interval(name string) time.Duration {
	return time.Duration(c.Spec.Intervals[name] * float64(time.Second))
}

// --- statement points (pgx's tracer) -------------------------------------------------------------

type bodyKey struct{}

// Tracer makes every statement of the connections configured with it a strike point (a queue's own
// pool: pgxpool.Config.ConnConfig.Tracer = client.Tracer()). The body's connections have none.
func (c *Client) Tracer() pgx.QueryTracer { return tracer{c} }

type tracer struct{ c *Client }

func (t tracer) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	c := t.c
	text := strings.Join(strings.Fields(data.SQL), " ")
	if bodyTexts[strings.ToLower(text)] {
		return ctx
	}
	point := Digest(data.SQL)
	c.mu.Lock()
	job, attempt := c.job, c.attempt
	key := fmt.Sprintf("%s %v", point, job != nil)
	first := !c.seen[key]
	c.seen[key] = true
	c.mu.Unlock()
	var jobField any
	if job != nil {
		jobField = *job
	}
	if first {
		c.Log("statement", map[string]any{"point": point, "job": jobField, "bound": job != nil})
	}
	if c.watch[watchKey(job, point)] {
		var att any
		if job != nil {
			att = attempt
		}
		c.Wait(jobField, att, point, conn.PgConn().PID())
	}
	return ctx
}

func (tracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// --- the body's connections ----------------------------------------------------------------------

func (c *Client) connect(ctx context.Context) (*pgx.Conn, error) {
	cfg, err := ConnConfig(c.DSN)
	if err != nil {
		return nil, err
	}
	cfg.RuntimeParams["application_name"] = c.Identity
	// no prepared statements kept: each statement sent as node-postgres and psycopg send it
	cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	c.Log("connect", map[string]any{"backend": conn.PgConn().PID()})
	return conn, nil
}

// alive says whether an idle body connection still answers an empty statement (pgconn's Ping, as
// pgxpool's ShouldPing and psycopg_pool's check_connection do). ctx is the pool's (Borrow's detached
// one), so a job's deadline never closes a sound connection.
func alive(ctx context.Context, conn *pgx.Conn) bool {
	if conn.IsClosed() {
		return false
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return conn.PgConn().Ping(pctx) == nil
}

// Borrow lends a body connection from the client's own small pool (pool_size at most; a job waits
// for one when as many run at once). A kept connection is checked before it is lent: one cut while
// idle -- a restart, a promotion -- would fail the body and burn the queue's attempt.
//
// As pgxpool's Acquire (puddle's initResourceValue; pgx #1259, #1287) -- the pool a Go job borrows its
// connection from -- the job waits under ctx, for a slot and for a connection being opened, and gives
// up with ctx's error when ctx ends first (River's JobTimeout bounds that wait as it bounds the job's
// statements). The pool's own work is not the job's: the check of a kept connection and the connect run
// under ctx's values without its deadline (open), and the job waits for them under ctx -- as pgxpool's
// ping and connect, a partition that black-holes a kept connection holds no job past its deadline -- and
// a connection checked or opened after its job gave up is kept for the next job. A connect cancelled with its job would be thrown away
// half made, and a burst of jobs on an empty pool would open, and lose, every connection again at each
// attempt.
func (c *Client) Borrow(ctx context.Context) (*pgx.Conn, error) {
	if err := ctx.Err(); err != nil { // as puddle's Acquire: a job already past its deadline takes none
		return nil, fmt.Errorf("pgjc: waiting for a body connection: %w", err)
	}
	select {
	case c.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("pgjc: waiting for a body connection: %w", ctx.Err())
	}
	pool := context.WithoutCancel(ctx)
	type opened struct {
		conn *pgx.Conn
		err  error
	}
	done := make(chan opened, 1)
	go func() {
		conn, err := c.open(pool)
		done <- opened{conn, err}
	}()
	select {
	case o := <-done:
		if o.err != nil {
			<-c.slots
			return nil, o.err
		}
		return o.conn, nil
	case <-ctx.Done():
		go func() { // the slot stays taken until the connection is checked or open, then kept for the next job
			if o := <-done; o.err == nil {
				c.Release(o.conn, false)
			} else {
				<-c.slots
			}
		}()
		return nil, fmt.Errorf("pgjc: waiting for a body connection being opened: %w", ctx.Err())
	}
}

// open is Borrow's pool work, under the pool's context (no job's deadline): a kept connection that still
// answers (a ping bounded at 5 s), else a new one (bounded by the DSN's connect_timeout).
func (c *Client) open(ctx context.Context) (*pgx.Conn, error) {
	for {
		c.poolMu.Lock()
		var conn *pgx.Conn
		if n := len(c.free); n > 0 {
			conn, c.free = c.free[n-1], c.free[:n-1]
		}
		c.poolMu.Unlock()
		if conn == nil {
			return c.connect(ctx)
		}
		if alive(ctx, conn) {
			return conn, nil
		}
		conn.Close(context.Background())
	}
}

// Release returns a body connection (a broken one is closed).
func (c *Client) Release(conn *pgx.Conn, broken bool) {
	if broken || conn.IsClosed() {
		conn.Close(context.Background())
	} else {
		c.poolMu.Lock()
		c.free = append(c.free, conn)
		c.poolMu.Unlock()
	}
	<-c.slots
}

// RunJob runs the harness's job body for one execution of the job args names (the task's arguments
// as enqueued), attempt as the queue counts it (1-based). It returns what the body raised, so the
// queue records the failure and applies its own retry policy. inFinish, optional: the queue's own
// completion, run in the body's finishing transaction after its job_runs insert, so both commit
// together (after-insert then lies after that commit); an error from it rolls both back.
//
// The body's statements run under ctx: a queue that cancels the job's context (River's JobTimeout)
// cuts the body at its next statement, as it would a Go job's own queries; its wait for a connection
// (Borrow) too, as a wait in pgxpool's Acquire, but not the connect it waits for. The work's sleep does
// not watch ctx (the harness's work stands for an external effect that runs to its end).
func (c *Client) RunJob(ctx context.Context, args map[string]any, attempt int,
	inFinish func(context.Context, pgx.Tx) error) error {
	ex := &execution{c: c, args: args, attempt: attempt}
	ex.job = toInt(args["job"])
	if name, ok := args["fault"].(string); ok && name != "" {
		ex.faultName = name
		if f, ok := c.Spec.Faults[name]; ok {
			ex.fault = &f
		}
	}
	conn, err := c.Borrow(ctx)
	if err != nil {
		return err
	}
	ex.conn = conn
	err = ex.run(ctx, inFinish)
	c.Release(conn, ex.broken)
	return err
}

func toInt(v any) int64 {
	switch x := v.(type) {
	case float64:
		return int64(x)
	case int64:
		return x
	case int:
		return int64(x)
	case json.Number:
		n, _ := x.Int64()
		return n
	}
	return 0
}

type execution struct {
	c         *Client
	args      map[string]any
	attempt   int
	job       int64
	conn      *pgx.Conn
	reached   []string
	faultName string
	fault     *Fault
	broken    bool
}

func (ex *execution) log(event string, fields map[string]any) {
	if fields == nil {
		fields = map[string]any{}
	}
	fields["job"], fields["attempt"] = ex.job, ex.attempt
	ex.c.Log(event, fields)
}

func (ex *execution) q(ctx context.Context, text string, params map[string]any) pgx.Row {
	t, v := Bind(text, params)
	return ex.conn.QueryRow(ctx, t, v...)
}

func (ex *execution) exec(ctx context.Context, text string, params map[string]any) error {
	t, v := Bind(text, params)
	_, err := ex.conn.Exec(ctx, t, v...)
	return err
}

func (ex *execution) run(ctx context.Context, inFinish func(context.Context, pgx.Tx) error) (err error) {
	c := ex.c
	sql := c.Spec.SQL
	tenantSpec := c.Spec.Tenant
	tenant := ex.args["tenant"]
	c.mu.Lock()
	c.started++
	job := ex.job
	c.job, c.attempt = &job, ex.attempt
	c.mu.Unlock()
	var faultField any
	if ex.faultName != "" {
		faultField = ex.faultName
	}
	defer func() {
		if err != nil {
			msg := strings.SplitN(err.Error(), "\n", 2)[0]
			ex.log("failed", map[string]any{"error": fmt.Sprintf("%T: %s", err, msg), "points": ex.reached})
			if _, rerr := ex.conn.Exec(context.Background(), "rollback"); rerr != nil {
				ex.broken = true
			}
		}
		if tenantSpec.Reset != nil {
			if _, rerr := ex.conn.Exec(context.Background(), *tenantSpec.Reset); rerr != nil {
				ex.broken = true
			}
		}
		if err == nil {
			ex.log("finished", map[string]any{"points": ex.reached})
		}
	}()
	ex.log("started", map[string]any{"tenant": tenant, "fault": faultField})
	if strikes, ok := ex.args["strikes"]; ok && strikes != nil && toInt(strikes) > 0 {
		nth := c.startedCount(ex.job)
		ex.log("execution-count", map[string]any{"nth": nth, "strikes": strikes})
		if int64(nth) > toInt(strikes) {
			ex.fault = nil
		}
	}
	if !tenantSpec.Autocommit {
		if _, err = ex.conn.Exec(ctx, "begin"); err != nil {
			return err
		}
	}
	me := strings.ReplaceAll(fmt.Sprintf("%s %d %d", c.Identity, ex.job, ex.attempt), "'", "''")
	// no parameters: the simple protocol, as the harness's own body sends it (body.sql says why)
	inherited := strings.Replace(sql["inherited_tenant"], "{me}", "'"+me+"'", 1)
	var value, last *string
	var pid int32
	var set *string
	err = ex.conn.QueryRow(ctx, inherited, pgx.QueryExecModeSimpleProtocol).Scan(&value, &last, &pid, &set)
	if err != nil {
		return err
	}
	ex.log("tenant-inherited", map[string]any{"value": value, "last": last, "backend": pid})
	if err = ex.point(ctx, "before-tenant"); err != nil {
		return err
	}
	if err = ex.setTenant(ctx, tenant); err != nil {
		return err
	}
	var visible, foreign int64
	if err = ex.q(ctx, sql["read_invoices"], map[string]any{"tenant": tenantInt(tenant)}).Scan(&visible, &foreign); err != nil {
		return err
	}
	ex.log("rows-visible", map[string]any{"tenant": tenant, "visible": visible, "foreign": foreign})
	var started time.Time
	if err = ex.conn.QueryRow(ctx, "select clock_timestamp()").Scan(&started); err != nil {
		return err
	}
	if !tenantSpec.Autocommit {
		if _, err = ex.conn.Exec(ctx, "commit"); err != nil {
			return err
		}
	}
	total := ex.workSeconds()
	time.Sleep(time.Duration(total * 500 * float64(time.Millisecond)))
	if err = ex.point(ctx, "mid-work"); err != nil {
		return err
	}
	time.Sleep(time.Duration(total * 500 * float64(time.Millisecond)))
	ex.log("effect", nil)
	if err = ex.point(ctx, "after-effect"); err != nil {
		return err
	}
	if err = ex.point(ctx, "before-finish"); err != nil {
		return err
	}
	tx, err := ex.conn.Begin(ctx)
	if err != nil {
		return err
	}
	if err = ex.setTenant(ctx, tenant); err != nil {
		return err
	}
	err = ex.exec(ctx, sql["insert_finished_run"], map[string]any{"job": ex.job, "worker": c.Identity,
		"attempt": ex.attempt, "started": started})
	if err != nil {
		return err
	}
	if inFinish != nil {
		if err = inFinish(ctx, tx); err != nil {
			return err
		}
	}
	if err = tx.Commit(ctx); err != nil {
		return err
	}
	return ex.point(ctx, "after-insert")
}

func tenantInt(tenant any) any {
	if tenant == nil {
		return nil
	}
	return toInt(tenant)
}

func (ex *execution) setTenant(ctx context.Context, tenant any) error {
	if tenant == nil {
		return nil
	}
	return ex.exec(ctx, ex.c.Spec.SQL["set_tenant"], map[string]any{"tenant": fmt.Sprint(toInt(tenant)),
		"local": ex.c.Spec.Tenant.Local})
}

func (ex *execution) workSeconds() float64 {
	d, _ := ex.args["duration"].(float64)
	seconds := d * ex.c.Spec.TimeScale
	if ex.fault != nil && ex.fault.WorkLeaseFactor != nil {
		return max(seconds, *ex.fault.WorkLeaseFactor*ex.c.Spec.Seconds["lease"])
	}
	return seconds
}

// point is a named point: the supervisor's wait if it watches it, then the job's own fault if it
// strikes here.
func (ex *execution) point(ctx context.Context, name string) error {
	ex.reached = append(ex.reached, name)
	if ex.c.watch[watchKey(float64(ex.job), name)] {
		ex.c.Wait(ex.job, ex.attempt, name, ex.conn.PgConn().PID())
	}
	f := ex.fault
	if f == nil || f.Strike == nil {
		return nil
	}
	at := ""
	if p, ok := ex.args["point"].(string); ok && p != "" {
		at = p
	} else if f.Point != nil {
		at = *f.Point
	}
	if at != name {
		return nil
	}
	ex.log("fault", map[string]any{"fault": ex.faultName, "point": name})
	switch *f.Strike {
	case "raise":
		return &InjectedError{"injected fault: raise at " + name}
	case "sql-error":
		_, err := ex.conn.Exec(ctx, "select 1/0")
		return err
	case "crash":
		syscall.Exit(ExitCrash) // no handler, no deferred call, no rollback
	case "hang":
		select {} // alive, never finishing
	}
	return fmt.Errorf("pgjc: unknown strike %s (contract %d)", *f.Strike, Contract)
}

// startedCount counts the started records of job in every log of the run.
func (c *Client) startedCount(job int64) int {
	n := 0
	files, _ := filepath.Glob(filepath.Join(c.Spec.RunDir, "*.events.jsonl"))
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if !strings.Contains(line, `"started"`) {
				continue
			}
			var r struct {
				Event string   `json:"event"`
				Job   *float64 `json:"job"`
			}
			if json.Unmarshal([]byte(line), &r) == nil && r.Event == "started" && r.Job != nil && int64(*r.Job) == job {
				n++
			}
		}
	}
	return n
}
