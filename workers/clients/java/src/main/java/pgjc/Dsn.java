package pgjc;

import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;

/**
 * DATABASE_URL (a libpq {@code postgresql://} URL, one host or several) as PgJDBC takes it: a
 * {@code jdbc:postgresql://} URL and the connection's properties. libpq's parameters become PgJDBC's
 * where it has one: {@code hostaddr} the host, {@code connect_timeout} connectTimeout,
 * {@code keepalives} tcpKeepAlive (PgJDBC sets no idle, interval or count: the kernel's), {@code
 * target_session_attrs=read-write} targetServerType=primary, {@code application_name} ApplicationName;
 * the rest it does not read ({@code keepalives_*}, {@code tcp_user_timeout}) are dropped.
 */
public final class Dsn {
  private Dsn() {}

  public record Jdbc(String url, Properties props) {}

  public static Jdbc parse(String dsn) {
    String rest = dsn.replaceFirst("^postgres(ql)?://", "");
    Map<String, String> q = new LinkedHashMap<>();
    int qm = rest.indexOf('?');
    if (qm >= 0) {
      for (String kv : rest.substring(qm + 1).split("&")) {
        if (kv.isEmpty()) {
          continue;
        }
        int eq = kv.indexOf('=');
        q.put(dec(eq < 0 ? kv : kv.substring(0, eq)), eq < 0 ? "" : dec(kv.substring(eq + 1)));
      }
      rest = rest.substring(0, qm);
    }
    Properties props = new Properties();
    int at = rest.lastIndexOf('@');
    if (at >= 0) {
      String auth = rest.substring(0, at);
      int colon = auth.indexOf(':');
      props.setProperty("user", dec(colon < 0 ? auth : auth.substring(0, colon)));
      if (colon >= 0) {
        props.setProperty("password", dec(auth.substring(colon + 1)));
      }
      rest = rest.substring(at + 1);
    }
    int slash = rest.indexOf('/');
    String hosts = slash < 0 ? rest : rest.substring(0, slash);
    String db = slash < 0 ? "" : dec(rest.substring(slash + 1));
    String addr = q.remove("hostaddr");
    if (addr != null && !addr.isEmpty() && !hosts.contains(",")) {
      int c = hosts.lastIndexOf(':');
      hosts = addr + (c >= 0 ? hosts.substring(c) : "");
    }
    String timeout = q.remove("connect_timeout");
    if (timeout != null) {
      props.setProperty("connectTimeout", timeout);
    }
    String keep = q.remove("keepalives");
    if (keep != null) {
      props.setProperty("tcpKeepAlive", String.valueOf(!"0".equals(keep)));
    }
    String target = q.remove("target_session_attrs");
    if (target != null) {
      props.setProperty("targetServerType", switch (target) {
        case "read-write", "primary" -> "primary";
        case "read-only", "standby" -> "secondary";
        case "prefer-standby" -> "preferSecondary";
        default -> "any";
      });
    }
    String app = q.remove("application_name");
    if (app != null) {
      props.setProperty("ApplicationName", app);
    }
    for (String k : new String[] {"keepalives_idle", "keepalives_interval", "keepalives_count", "tcp_user_timeout"}) {
      q.remove(k);
    }
    q.forEach(props::setProperty); // sslmode, options, ...: the same names in PgJDBC
    return new Jdbc("jdbc:postgresql://" + hosts + "/" + db, props);
  }

  private static String dec(String s) {
    return URLDecoder.decode(s.replace("+", "%2B"), StandardCharsets.UTF_8);
  }
}
