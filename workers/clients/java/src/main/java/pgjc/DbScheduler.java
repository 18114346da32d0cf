package pgjc;

import com.fasterxml.jackson.databind.JsonNode;
import com.github.kagkarlsson.scheduler.Scheduler;
import com.github.kagkarlsson.scheduler.SchedulerClient;
import com.github.kagkarlsson.scheduler.SchedulerName;
import com.github.kagkarlsson.scheduler.task.FailureHandler;
import com.github.kagkarlsson.scheduler.task.TaskInstance;
import com.github.kagkarlsson.scheduler.task.helper.OneTimeTask;
import com.github.kagkarlsson.scheduler.task.helper.Tasks;
import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Callable;
import javax.sql.DataSource;

/**
 * db-scheduler (com.github.kagkarlsson:db-scheduler, the version pom.xml pins) through the worker
 * contract; the Python side is adapters/db_scheduler.py.
 *
 * <p>What runs is db-scheduler's own code, configured as its README runs it: {@code
 * Scheduler.create(dataSource, task)} over a HikariCP pool, one {@code Tasks.oneTime} task whose
 * instances are the harness's jobs (the job's arguments as the task data, a String, db-scheduler's
 * default Java serializer), {@code start()}: the due-executor polling with its default strategy
 * (FETCH, 0.5-3.0 x threads), 10 executor threads, the housekeeper's heartbeats and dead-execution
 * detection ({@code ReviveDeadExecution}: a picked execution whose heartbeat is older than
 * heartbeatInterval x missedHeartbeatsLimit is rescheduled now, its consecutive failures raised by
 * one). The intervals are the run's, in the ratios of db-scheduler's defaults
 * (adapters/db_scheduler.py's TIMING): pollingInterval, heartbeatInterval, shutdownMaxWait and the
 * failure handler's retry delay; missedHeartbeatsLimit stays at its default 6.
 *
 * <p>Failures: {@code MaxRetriesFailureHandler(max_attempts - 1, OnFailureRetryLater(5 min, scaled))},
 * the README's way to bound retries: the default OneTimeTask retries every 5 minutes for ever. Its
 * give-up deletes the row as a completion does; its maxRetriesExceededHandler marks the shadow row
 * dead (db-scheduler.sql).
 *
 * <p>A deploy's SIGTERM: no more jobs ({@link Client#mayDequeue}), then {@code Scheduler.stop()}:
 * the due-executor stops, running executions get shutdownMaxWait to finish.
 */
final class DbScheduler implements Main.Command {
  static final String TASK = "pgjc";
  private Map<String, String> sql;

  @Override
  public Map<String, Callable<Void>> subcommands(String[] args) throws IOException {
    try (InputStream in = DbScheduler.class.getResourceAsStream("/pgjc/db-scheduler.sql")) {
      sql = Sql.parse(new String(in.readAllBytes(), StandardCharsets.UTF_8));
    }
    return Map.of("describe", this::describe, "install", this::install, "enqueue", this::enqueue, "work", this::work);
  }

  /** db-scheduler's version, from its jar's Maven properties (kept in the shaded jar). */
  static String version() {
    try (InputStream in = Scheduler.class.getResourceAsStream(
        "/META-INF/maven/com.github.kagkarlsson/db-scheduler/pom.properties")) {
      Properties p = new Properties();
      p.load(in);
      return p.getProperty("version", "unknown");
    } catch (IOException | NullPointerException e) {
      return "unknown";
    }
  }

  static String quoteIdent(String name) {
    return "\"" + name.replace("\"", "\"\"") + "\"";
  }

  private static Connection connect() throws SQLException {
    Dsn.Jdbc j = Dsn.parse(System.getenv("DATABASE_URL"));
    return DriverManager.getConnection(j.url(), j.props());
  }

  private Void describe() {
    Map<String, Object> d = new LinkedHashMap<>();
    d.put("kind", "descriptor");
    d.put("contract", Client.CONTRACT);
    d.put("system", "db-scheduler");
    d.put("version", version());
    d.put("runtime", "java " + Runtime.version());
    d.put("sql", Map.of("reset", sql.get("reset"), "pending", sql.get("pending"), "final_states", sql.get("final_states"),
        "accepted_finishes", sql.get("accepted_finishes")));
    d.put("finish_history", "last"); // a retried failure or a revival leaves only the row's counters
    d.put("status", Map.of("scheduled", "queued", "picked", "running", "removed", "done", "stopped", "dead"));
    Main.emit(d);
    return null;
  }

  private Void install() throws SQLException {
    try (Connection conn = connect(); Statement st = conn.createStatement()) {
      st.execute(sql.get("install"));
      st.execute(sql.get("grant").replace("{role}", quoteIdent(System.getenv("PGJC_WORKER_ROLE"))));
    }
    Main.emit(Map.of("kind", "installed"));
    return null;
  }

  /** The task as every subcommand knows it; the failure handler only matters to a scheduler. */
  private OneTimeTask<String> task(int maxAttempts, Duration retry, DataSource marks, Client client) {
    FailureHandler<String> retryLater = new FailureHandler.OnFailureRetryLater<>(retry);
    FailureHandler<String> bounded = new FailureHandler.MaxRetriesFailureHandler<>(Math.max(maxAttempts - 1, 0),
        retryLater, (complete, ops) -> markDead(marks, sql.get("mark_dead"), complete.getExecution().taskInstance));
    return Tasks.oneTime(TASK, String.class).onFailure(bounded).execute((inst, ctx) -> {
      int attempt = ctx.getExecution().consecutiveFailures + 1;
      try {
        client.runJob(Client.JSON.readTree(inst.getData()), attempt, null);
      } catch (RuntimeException e) {
        throw e;
      } catch (Exception e) {
        throw new RuntimeException(e);
      }
    });
  }

  private static void markDead(DataSource marks, String text, TaskInstance<?> inst) {
    Map<String, Object> p = new HashMap<>();
    p.put("task", inst.getTaskName());
    p.put("instance", inst.getId());
    try (Connection conn = marks.getConnection()) {
      Sql.exec(conn, text, p);
    } catch (SQLException e) {
      System.err.println("db-scheduler: marking " + inst + " dead: " + e);
    }
  }

  private Void enqueue() throws Exception {
    JsonNode req = Client.JSON.readTree(System.in);
    Dsn.Jdbc j = Dsn.parse(System.getenv("DATABASE_URL"));
    List<List<Object>> ids = new ArrayList<>();
    try (HikariDataSource ds = pool(j, null, 1)) {
      OneTimeTask<String> task = task(req.path("max_attempts").asInt(1), Duration.ofMinutes(5), ds, null);
      SchedulerClient client = SchedulerClient.Builder.create(ds, task).build();
      for (JsonNode args : req.path("jobs")) {
        String id = args.path("job").asText();
        client.schedule(task.schedulableInstance(id, args.toString())); // due now
        ids.add(List.of(args.path("job").asLong(), id));
      }
      double deadAfter = req.path("intervals").path("heartbeat interval").asDouble() * MISSED_HEARTBEATS_LIMIT;
      try (Connection conn = ds.getConnection()) {
        Sql.exec(conn, sql.get("run"), Map.of("dead_after", deadAfter));
      }
    }
    Main.emit(Map.of("kind", "enqueued", "ids", ids));
    return null;
  }

  /** SchedulerBuilder.DEFAULT_MISSED_HEARTBEATS_LIMIT, left as it is: a run's dead_after is heartbeat x 6. */
  static final int MISSED_HEARTBEATS_LIMIT = com.github.kagkarlsson.scheduler.SchedulerBuilder.DEFAULT_MISSED_HEARTBEATS_LIMIT;

  /** A HikariCP pool on the DSN (maximumPoolSize: Hikari's default 10 unless given). */
  static HikariDataSource pool(Dsn.Jdbc j, String name, int size) {
    HikariConfig hc = new HikariConfig();
    hc.setJdbcUrl(j.url());
    Properties p = new Properties();
    p.putAll(j.props());
    if (name != null) {
      p.setProperty("ApplicationName", name);
      hc.setPoolName(name);
    }
    hc.setDataSourceProperties(p);
    if (size > 0) {
      hc.setMaximumPoolSize(size);
    }
    return new HikariDataSource(hc);
  }

  private Void work() throws Exception {
    Client client = new Client();
    Dsn.Jdbc j = Dsn.parse(client.dsn);
    try (HikariDataSource ds = pool(j, client.identity + "/db-scheduler", 0)) {
      OneTimeTask<String> task = task(client.spec.path("max_attempts").asInt(1), client.interval("retry delay"), ds,
          client);
      // db-scheduler's own statements are strike points (Traced); its pool is Hikari's
      Scheduler scheduler = Scheduler.create(Traced.dataSource(ds, client), task)
          .schedulerName(new SchedulerName.Fixed(client.identity))
          .pollingInterval(client.interval("polling interval"))
          .heartbeatInterval(client.interval("heartbeat interval"))
          .shutdownMaxWait(client.interval("shutdown max wait"))
          .build();
      scheduler.start();
      long poll = Math.max(1, (long) (client.seconds("poll") * 1000));
      while (client.mayDequeue()) {
        Thread.sleep(poll);
      }
      // the budget spent or a deploy's SIGTERM: db-scheduler's own graceful stop
      scheduler.stop();
    }
    client.close();
    return null;
  }
}
