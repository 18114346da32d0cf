package pgjc;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;

/**
 * The reference queue (examples/contract/queue.sql) as a contract client in Java: the same queue as
 * examples/contract/worker.py, worker.js and the Go client's cmd/reference.
 *
 * <pre>pg-job-chaos search --design contract --design-option command="java -jar pgjc.jar reference examples/contract/queue.sql"</pre>
 */
final class Reference implements Main.Command {
  private Map<String, String> sql;

  @Override
  public Map<String, Callable<Void>> subcommands(String[] args) throws Exception {
    if (args.length < 1) {
      throw new IllegalArgumentException("usage: reference QUEUE.sql {describe|install|enqueue|work}");
    }
    sql = Sql.load(Path.of(args[0]));
    return Map.of("describe", this::describe, "install", this::install, "enqueue", this::enqueue, "work", this::work);
  }

  private static Connection connect(String app) throws SQLException {
    Dsn.Jdbc j = Dsn.parse(System.getenv("DATABASE_URL"));
    if (app != null) {
      j.props().setProperty("ApplicationName", app);
    }
    return DriverManager.getConnection(j.url(), j.props());
  }

  private Void describe() {
    Map<String, Object> d = new LinkedHashMap<>();
    d.put("kind", "descriptor");
    d.put("contract", Client.CONTRACT);
    d.put("system", "contract-reference-java");
    d.put("version", "1");
    d.put("runtime", "java " + Runtime.version());
    d.put("sql", Map.of("reset", sql.get("reset"), "pending", sql.get("pending"), "final_states", sql.get("final_states")));
    d.put("status", Map.of("queued", "queued", "running", "running", "done", "done", "failed", "dead"));
    Main.emit(d);
    return null;
  }

  private Void install() throws SQLException {
    try (Connection conn = connect(null); Statement st = conn.createStatement()) {
      st.execute(sql.get("install"));
      st.execute(sql.get("grant").replace("{role}", DbScheduler.quoteIdent(System.getenv("PGJC_WORKER_ROLE"))));
    }
    Main.emit(Map.of("kind", "installed"));
    return null;
  }

  private Void enqueue() throws Exception {
    JsonNode req = Client.JSON.readTree(System.in);
    List<List<Object>> ids = new ArrayList<>();
    try (Connection conn = connect(null)) {
      for (JsonNode args : req.path("jobs")) {
        Map<String, Object> p = new HashMap<>();
        p.put("args", args.toString());
        p.put("max_attempts", req.path("max_attempts").asInt());
        try (PreparedStatement ps = Sql.prepare(conn, sql.get("enqueue"), p); ResultSet rs = ps.executeQuery()) {
          rs.next();
          ids.add(List.of(args.path("job").asLong(), rs.getLong(1)));
        }
      }
    }
    Main.emit(Map.of("kind", "enqueued", "ids", ids));
    return null;
  }

  private Void work() throws Exception {
    Client client = new Client();
    double lease = client.seconds("lease");
    double poll = client.seconds("poll");
    // the queue's own statements are strike points too
    try (Connection conn = Traced.connection(connect(client.identity + "/queue"), client)) {
      while (client.mayDequeue()) {
        long id;
        JsonNode args;
        int attempts;
        try (PreparedStatement ps = Sql.prepare(conn, sql.get("claim"), Map.of("lease", lease));
             ResultSet rs = ps.executeQuery()) {
          if (!rs.next()) {
            Thread.sleep((long) (poll * 1000));
            continue;
          }
          id = rs.getLong(1);
          args = Client.JSON.readTree(rs.getString(2));
          attempts = rs.getInt(3);
        }
        try {
          client.runJob(args, attempts, null);
        } catch (Exception e) {
          Map<String, Object> p = new HashMap<>();
          p.put("id", id);
          p.put("error", e.getClass().getName() + ": " + e.getMessage());
          Sql.exec(conn, sql.get("fail"), p);
          continue;
        }
        Sql.exec(conn, sql.get("finish"), Map.of("id", id));
      }
    }
    client.close();
    return null;
  }
}
