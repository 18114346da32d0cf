package pgjc;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import org.postgresql.PGConnection;
import sun.misc.Signal;

/**
 * One worker process's side of the worker contract, version 1 (docs/reference/contract.md): the
 * spec file PGJC_CONTRACT names, the execution log's records (one write per line on an O_APPEND
 * stream), the wait at a watched point for the supervisor's go (SIGUSR1, taken by a signal handler
 * thread: the queue's threads run on meanwhile), a deploy's SIGTERM (no more jobs: {@link
 * #mayDequeue}), and the bodies' connections, each checked before it is lent. The same contract as
 * workers/clients/go/pgjc.go, whose structure this follows.
 *
 * <p>The clock of the records is {@link System#nanoTime()}: HotSpot reads CLOCK_MONOTONIC on Linux,
 * comparable with the harness's time.monotonic().
 */
public final class Client {
  public static final int CONTRACT = 1;
  public static final String ENV_SPEC = "PGJC_CONTRACT";
  public static final int EXIT_CRASH = 1;
  public static final ObjectMapper JSON = new ObjectMapper();

  /** The body's transaction control, clock read and the borrow's check: never strike points. */
  private static final Set<String> BODY_TEXTS =
      Set.of("select clock_timestamp()", "begin", "commit", "rollback", "", "-- ping");

  public final JsonNode spec;
  public final String identity;
  public final String dsn;
  private final Set<String> watch = new HashSet<>();
  private final FileOutputStream log;
  private final long pid = ProcessHandle.current().pid();

  // guarded by this: the seen statements, the started count, the job this process last started
  private final Set<String> seen = new HashSet<>();
  private int started;
  private Long job;
  private int attempt;

  private final Object waitLock = new Object(); // one waiter at a time: the go is process-wide
  private final Semaphore gos = new Semaphore(0);
  private volatile boolean terminating;

  private final Deque<Connection> free = new ArrayDeque<>(); // guarded by itself
  private final Semaphore slots;

  /** Reads the spec file PGJC_CONTRACT names and writes client-start. */
  public Client() throws IOException {
    String file = System.getenv(ENV_SPEC);
    if (file == null || file.isEmpty()) {
      throw new IllegalStateException("pgjc: " + ENV_SPEC + " is not set (run by pg-job-chaos's contract design)");
    }
    spec = JSON.readTree(Files.readString(Path.of(file)));
    if (spec.path("contract").asInt() != CONTRACT) {
      throw new IllegalStateException("pgjc: contract " + spec.path("contract") + "; this client speaks " + CONTRACT);
    }
    identity = spec.path("identity").asText();
    dsn = spec.path("dsn").asText();
    for (JsonNode w : spec.path("watch")) {
      watch.add(watchKey(w.get(0).isNull() ? null : w.get(0).asLong(), w.get(1).asText()));
    }
    slots = new Semaphore(Math.max(spec.path("pool_size").asInt(1), 1));
    log = new FileOutputStream(spec.path("log").asText(), true); // O_APPEND
    Signal.handle(new Signal("USR1"), s -> gos.release());
    // A deploy's SIGTERM (forwarded by the forked worker): take no more jobs; the queue's own stop follows.
    Signal.handle(new Signal("TERM"), s -> terminating = true);
    // The forked worker asked the kernel to kill us with it; a parent gone all the same ends us too.
    long parent = ProcessHandle.current().parent().map(ProcessHandle::pid).orElse(-1L);
    Thread orphan = new Thread(() -> {
      while (true) {
        try {
          Thread.sleep(500);
        } catch (InterruptedException e) {
          return;
        }
        if (ProcessHandle.current().parent().map(ProcessHandle::pid).orElse(-1L) != parent) {
          Runtime.getRuntime().halt(70);
        }
      }
    }, "pgjc-parent");
    orphan.setDaemon(true);
    orphan.start();
    log("client-start", Map.of("runtime", "java " + Runtime.version(), "contract", CONTRACT));
    // The body pool's first connection opens now, as a JVM pool opens its minimum at start (HikariCP's
    // minimumIdle): a cold JVM's first connect (PgJDBC's classes, SCRAM) took 75 ms in the first job's
    // body, a third of the reference queue's lease at time scale 0.2. Lent, it is checked like any other.
    try {
      Connection first = connect();
      synchronized (free) {
        free.addLast(first);
      }
    } catch (SQLException e) {
      // opened as needed instead
    }
  }

  static String watchKey(Long job, String point) {
    return (job == null ? "null" : job.toString()) + " " + point;
  }

  boolean watches(Long job, String point) {
    return watch.contains(watchKey(job, point));
  }

  /** Appends one record to the execution log in a single write. */
  public void log(String event, Map<String, ?> fields) {
    ObjectNode rec = JSON.createObjectNode();
    rec.put("t", System.nanoTime() / 1e9);
    rec.put("wall", System.currentTimeMillis() / 1e3);
    rec.put("worker", identity);
    rec.put("pid", pid);
    rec.put("event", event);
    fields.forEach((k, v) -> rec.set(k, JSON.valueToTree(v)));
    byte[] line = (rec.toString() + "\n").getBytes(StandardCharsets.UTF_8);
    synchronized (log) {
      try {
        log.write(line);
      } catch (IOException e) {
        throw new IllegalStateException(e);
      }
    }
  }

  /** The wait at a watched point: say so, and wait for the go (at most strike_wait seconds). */
  public void await(Long job, Integer attempt, String point, int backend) {
    synchronized (waitLock) {
      gos.drainPermits(); // a go that came after an earlier wait timed out is not this one's
      Map<String, Object> f = new LinkedHashMap<>();
      f.put("job", job);
      f.put("attempt", attempt);
      f.put("point", point);
      f.put("backend", backend);
      log("point", f);
      boolean went;
      try {
        went = gos.tryAcquire((long) (spec.path("strike_wait").asDouble() * 1000), TimeUnit.MILLISECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        went = false;
      }
      if (!went) {
        Map<String, Object> t = new LinkedHashMap<>(f);
        t.remove("backend");
        log("point-timeout", t);
      }
    }
  }

  /** Whether the dequeue budget allows another job: not after a deploy's SIGTERM, nor past the budget. */
  public synchronized boolean mayDequeue() {
    if (terminating) {
      return false;
    }
    JsonNode d = spec.path("dequeues");
    return d.isNull() || d.isMissingNode() || started < d.asInt();
  }

  public boolean terminating() {
    return terminating;
  }

  /** A design option's value, or def. */
  public String option(String name, String def) {
    String v = spec.path("options").path(name).asText("");
    return v.isEmpty() ? def : v;
  }

  /** One of the queue's own intervals (spec "intervals"). */
  public Duration interval(String name) {
    return Duration.ofNanos((long) (spec.path("intervals").path(name).asDouble() * 1e9));
  }

  /** One of the harness's seconds (spec "seconds": lease, poll, heartbeat, max_runtime). */
  public double seconds(String name) {
    return spec.path("seconds").path(name).asDouble();
  }

  // --- statement points (Traced's hook) --------------------------------------------------------------

  /**
   * A statement the queue is about to send on conn: its point logged the first time (bound: after
   * a job started in this process), and held if the supervisor watches it.
   */
  void statement(String text, Connection conn) {
    if (BODY_TEXTS.contains(Sql.collapse(text).toLowerCase())) {
      return;
    }
    String point = Sql.digest(text);
    Long j;
    int a;
    boolean first;
    synchronized (this) {
      j = job;
      a = attempt;
      first = seen.add(point + " " + (j != null));
    }
    if (first) {
      Map<String, Object> f = new LinkedHashMap<>();
      f.put("point", point);
      f.put("job", j);
      f.put("bound", j != null);
      log("statement", f);
    }
    if (watches(j, point)) {
      await(j, j != null ? a : null, point, backend(conn));
    }
  }

  public static int backend(Connection conn) {
    try {
      return conn.unwrap(PGConnection.class).getBackendPID();
    } catch (SQLException e) {
      return 0;
    }
  }

  synchronized void started(long job, int attempt) {
    started++;
    this.job = job;
    this.attempt = attempt;
  }

  // --- the body's connections -------------------------------------------------------------------------

  Connection connect() throws SQLException {
    Dsn.Jdbc j = Dsn.parse(dsn);
    Properties p = j.props();
    p.setProperty("ApplicationName", identity);
    // each statement sent as node-postgres and pgx send it: a parameterless one by the simple
    // protocol (body.sql's inherited_tenant says why), none kept prepared on the server
    p.setProperty("preferQueryMode", "extendedForPrepared");
    p.setProperty("prepareThreshold", "0");
    Connection conn = DriverManager.getConnection(j.url(), p);
    log("connect", Map.of("backend", backend(conn)));
    return conn;
  }

  /** Whether an idle body connection still answers: PgJDBC's isValid sends an empty statement. */
  static boolean alive(Connection conn) {
    try {
      return !conn.isClosed() && conn.isValid(5);
    } catch (SQLException e) {
      return false;
    }
  }

  /**
   * Lends a body connection from the client's own small pool (pool_size at most; a job waits for one
   * when as many run at once). A kept connection is checked before it is lent: one cut while idle --
   * a restart, a promotion -- would fail the body and burn the queue's attempt.
   */
  public Connection borrow() throws SQLException, InterruptedException {
    slots.acquire();
    try {
      while (true) {
        Connection conn;
        synchronized (free) {
          conn = free.pollLast();
        }
        if (conn == null) {
          return connect();
        }
        if (alive(conn)) {
          return conn;
        }
        quietClose(conn);
      }
    } catch (SQLException | RuntimeException e) {
      slots.release();
      throw e;
    }
  }

  /** Returns a body connection (a broken one is closed). */
  public void release(Connection conn, boolean broken) {
    boolean closed;
    try {
      closed = conn.isClosed();
    } catch (SQLException e) {
      closed = true;
    }
    if (broken || closed) {
      quietClose(conn);
    } else {
      synchronized (free) {
        free.addLast(conn);
      }
    }
    slots.release();
  }

  static void quietClose(Connection conn) {
    try {
      conn.close();
    } catch (SQLException e) {
      // already gone
    }
  }

  /** Closes the kept body connections. */
  public void close() {
    synchronized (free) {
      for (Iterator<Connection> it = free.iterator(); it.hasNext(); ) {
        quietClose(it.next());
        it.remove();
      }
    }
  }

  /**
   * Runs the harness's job body for one execution of the job args names, attempt as the queue counts
   * it (1-based); throws what the body raised, so the queue records the failure and applies its own
   * retry policy. inFinish, optional: the queue's own completion, run in the body's finishing
   * transaction after its job_runs insert, so both commit together.
   */
  public void runJob(JsonNode args, int attempt, Body.Finish inFinish) throws Exception {
    new Body(this, args, attempt).run(inFinish);
  }

  /** The started records of job in every log of the run. */
  int startedCount(long job) {
    int n = 0;
    try (var files = Files.newDirectoryStream(Path.of(spec.path("run_dir").asText()), "*.events.jsonl")) {
      for (Path f : files) {
        for (String line : Files.readAllLines(f)) {
          if (!line.contains("\"started\"")) {
            continue;
          }
          try {
            JsonNode r = JSON.readTree(line);
            if ("started".equals(r.path("event").asText()) && r.path("job").isNumber() && r.path("job").asLong() == job) {
              n++;
            }
          } catch (IOException e) {
            // a line being written
          }
        }
      }
    } catch (IOException e) {
      // no logs yet
    }
    return n;
  }
}
