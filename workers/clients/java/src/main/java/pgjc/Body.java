package pgjc;

import com.fasterxml.jackson.databind.JsonNode;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.OffsetDateTime;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * One execution of the harness's job body (docs/reference/contract.md, "Records"): the same events
 * in the same order as the hosted body and the other clients (pgjc.go's execution.run).
 */
final class Body {
  /** The queue's own completion, run in the body's finishing transaction (on the body's connection). */
  @FunctionalInterface
  public interface Finish {
    void run(Connection conn) throws Exception;
  }

  /** The body's raise fault. */
  static final class InjectedError extends RuntimeException {
    InjectedError(String msg) {
      super(msg);
    }
  }

  private final Client c;
  private final JsonNode args;
  private final int attempt;
  private final long job;
  private final String faultName;
  private JsonNode fault; // null: none, or a transient fault spent
  private final List<String> reached = new ArrayList<>();
  private Connection conn;

  Body(Client c, JsonNode args, int attempt) {
    this.c = c;
    this.args = args;
    this.attempt = attempt;
    this.job = args.path("job").asLong();
    String name = args.path("fault").asText("");
    this.faultName = name.isEmpty() ? null : name;
    JsonNode f = faultName == null ? null : c.spec.path("faults").get(faultName);
    this.fault = f == null || f.isNull() ? null : f;
  }

  private void log(String event, Map<String, Object> fields) {
    Map<String, Object> f = new LinkedHashMap<>(fields);
    f.put("job", job);
    f.put("attempt", attempt);
    c.log(event, f);
  }

  private static Map<String, Object> fields(Object... kv) {
    Map<String, Object> m = new LinkedHashMap<>();
    for (int i = 0; i < kv.length; i += 2) {
      m.put((String) kv[i], kv[i + 1]);
    }
    return m;
  }

  void run(Finish inFinish) throws Exception {
    conn = c.borrow();
    boolean broken = false;
    Exception failure = null;
    try {
      execute(inFinish);
    } catch (Exception e) {
      failure = e;
      String msg = String.valueOf(e.getMessage()).split("\n", 2)[0];
      log("failed", fields("error", e.getClass().getName() + ": " + msg, "points", reached));
      try {
        if (!conn.getAutoCommit()) {
          conn.rollback();
          conn.setAutoCommit(true);
        }
      } catch (SQLException r) {
        broken = true;
      }
    }
    resetTenant();
    if (failure == null) {
      log("finished", fields("points", reached));
    }
    c.release(conn, broken || resetBroken); // after the reset: the connection is the next body's once lent
    if (failure != null) {
      throw failure;
    }
  }

  private boolean resetBroken;

  private void resetTenant() {
    String reset = c.spec.path("tenant").path("reset").asText("");
    if (reset.isEmpty() || resetBroken) {
      return;
    }
    try (Statement st = conn.createStatement()) {
      st.execute(reset);
    } catch (SQLException e) {
      resetBroken = true;
    }
  }

  private void execute(Finish inFinish) throws Exception {
    JsonNode sql = c.spec.path("sql");
    JsonNode tenantSpec = c.spec.path("tenant");
    boolean autocommit = tenantSpec.path("autocommit").asBoolean();
    JsonNode tenant = args.path("tenant");
    c.started(job, attempt);
    log("started", fields("tenant", tenant.isMissingNode() ? null : tenant, "fault", faultName));
    long strikes = args.path("strikes").asLong(0);
    if (strikes > 0) {
      int nth = c.startedCount(job);
      log("execution-count", fields("nth", nth, "strikes", strikes));
      if (nth > strikes) {
        fault = null;
      }
    }
    if (!autocommit) {
      conn.setAutoCommit(false);
    }
    String me = (c.identity + " " + job + " " + attempt).replace("'", "''");
    // no parameters: the simple protocol (extendedForPrepared), as the harness's own body sends it
    String inherited = sql.path("inherited_tenant").asText().replace("{me}", "'" + me + "'");
    try (Statement st = conn.createStatement(); ResultSet rs = st.executeQuery(inherited)) {
      rs.next();
      log("tenant-inherited", fields("value", rs.getString(1), "last", rs.getString(2), "backend", rs.getInt(3)));
    }
    point("before-tenant");
    setTenant(tenant);
    Map<String, Object> p = new HashMap<>();
    p.put("tenant", tenantInt(tenant));
    try (PreparedStatement ps = Sql.prepare(conn, sql.path("read_invoices").asText(), p);
         ResultSet rs = ps.executeQuery()) {
      rs.next();
      log("rows-visible", fields("tenant", tenant.isMissingNode() ? null : tenant, "visible", rs.getLong(1),
          "foreign", rs.getLong(2)));
    }
    OffsetDateTime started;
    try (Statement st = conn.createStatement(); ResultSet rs = st.executeQuery("select clock_timestamp()")) {
      rs.next();
      started = rs.getObject(1, OffsetDateTime.class);
    }
    if (!autocommit) {
      conn.commit();
      conn.setAutoCommit(true);
    }
    double total = workSeconds();
    Thread.sleep((long) (total * 500));
    point("mid-work");
    Thread.sleep((long) (total * 500));
    log("effect", fields());
    point("after-effect");
    point("before-finish");
    conn.setAutoCommit(false);
    setTenant(tenant);
    Map<String, Object> run = new HashMap<>();
    run.put("job", job);
    run.put("worker", c.identity);
    run.put("attempt", attempt);
    run.put("started", started);
    Sql.exec(conn, sql.path("insert_finished_run").asText(), run);
    if (inFinish != null) {
      inFinish.run(conn);
    }
    conn.commit();
    conn.setAutoCommit(true);
    point("after-insert");
  }

  private static Object tenantInt(JsonNode tenant) {
    return tenant.isMissingNode() || tenant.isNull() ? null : tenant.asLong();
  }

  private void setTenant(JsonNode tenant) throws SQLException {
    if (tenant.isMissingNode() || tenant.isNull()) {
      return;
    }
    Map<String, Object> p = new HashMap<>();
    p.put("tenant", String.valueOf(tenant.asLong()));
    p.put("local", c.spec.path("tenant").path("local").asBoolean());
    try (PreparedStatement ps = Sql.prepare(conn, c.spec.path("sql").path("set_tenant").asText(), p)) {
      ps.execute();
    }
  }

  private double workSeconds() {
    double seconds = args.path("duration").asDouble(0) * c.spec.path("time_scale").asDouble();
    if (fault != null && fault.path("work_lease_factor").isNumber()) {
      return Math.max(seconds, fault.path("work_lease_factor").asDouble() * c.seconds("lease"));
    }
    return seconds;
  }

  /** A named point: the supervisor's wait if it watches it, then the job's own fault if it strikes here. */
  private void point(String name) throws SQLException, InterruptedException {
    reached.add(name);
    if (c.watches(job, name)) {
      c.await(job, attempt, name, Client.backend(conn));
    }
    if (fault == null || !fault.path("strike").isTextual()) {
      return;
    }
    String at = args.path("point").asText("");
    if (at.isEmpty()) {
      at = fault.path("point").asText("");
    }
    if (!at.equals(name)) {
      return;
    }
    log("fault", fields("fault", faultName, "point", name));
    String strike = fault.path("strike").asText();
    switch (strike) {
      case "raise" -> throw new InjectedError("injected fault: raise at " + name);
      case "sql-error" -> {
        try (Statement st = conn.createStatement()) {
          st.execute("select 1/0");
        }
      }
      case "crash" -> Runtime.getRuntime().halt(Client.EXIT_CRASH); // no hook, no finally, no rollback
      case "hang" -> {
        while (true) {
          Thread.sleep(Long.MAX_VALUE); // alive, never finishing
        }
      }
      default -> throw new IllegalStateException("pgjc: unknown strike " + strike + " (contract " + Client.CONTRACT + ")");
    }
  }
}
