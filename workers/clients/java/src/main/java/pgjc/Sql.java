package pgjc;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * SQL texts as the harness writes them: named statements in a .sql file, {@code %(name)s}
 * placeholders, and a statement's strike point (its digest). The same rules as pgjc.go's LoadSQL,
 * Bind and Digest.
 */
public final class Sql {
  private Sql() {}

  private static final Pattern PLACEHOLDER = Pattern.compile("%\\((\\w+)\\)s");

  /** A statement's strike point: "sql:" and 8 hex digits of the SHA-1 of its whitespace-collapsed text. */
  public static String digest(String text) {
    try {
      byte[] sum = MessageDigest.getInstance("SHA-1").digest(collapse(text).getBytes(StandardCharsets.UTF_8));
      StringBuilder hex = new StringBuilder("sql:");
      for (int i = 0; i < 4; i++) {
        hex.append(String.format("%02x", sum[i]));
      }
      return hex.toString();
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  /** The text with every run of whitespace one space, trimmed. */
  public static String collapse(String text) {
    return text.trim().replaceAll("\\s+", " ");
  }

  /** A text with its %(name)s placeholders as JDBC's ? and the values in their order (a name used twice: twice). */
  public record Bound(String text, List<Object> values) {}

  public static Bound bind(String text, Map<String, ?> params) {
    Matcher m = PLACEHOLDER.matcher(text);
    List<Object> values = new ArrayList<>();
    StringBuilder out = new StringBuilder();
    while (m.find()) {
      values.add(params.get(m.group(1)));
      m.appendReplacement(out, "?");
    }
    m.appendTail(out);
    return new Bound(out.toString(), values);
  }

  /** A statement of *conn* with the placeholders bound. */
  public static PreparedStatement prepare(Connection conn, String text, Map<String, ?> params) throws SQLException {
    Bound b = bind(text, params);
    PreparedStatement ps = conn.prepareStatement(b.text());
    for (int i = 0; i < b.values().size(); i++) {
      ps.setObject(i + 1, b.values().get(i));
    }
    return ps;
  }

  /** Run a bound statement for its effect. */
  public static void exec(Connection conn, String text, Map<String, ?> params) throws SQLException {
    try (PreparedStatement ps = prepare(conn, text, params)) {
      ps.execute();
    }
  }

  /** The statements of a .sql file, each after a "-- name: NAME" line (comment lines dropped). */
  public static Map<String, String> load(Path file) throws IOException {
    return parse(Files.readString(file));
  }

  public static Map<String, String> parse(String data) {
    Map<String, String> out = new LinkedHashMap<>();
    String name = null;
    StringBuilder lines = new StringBuilder();
    for (String line : data.split("\n", -1)) {
      if (line.startsWith("-- name:")) {
        flush(out, name, lines);
        name = line.substring("-- name:".length()).trim();
        lines.setLength(0);
      } else if (name != null && !line.stripLeading().startsWith("--")) {
        lines.append(line).append('\n');
      }
    }
    flush(out, name, lines);
    return out;
  }

  private static void flush(Map<String, String> out, String name, StringBuilder lines) {
    if (name != null) {
      String text = lines.toString().trim();
      out.put(name, text.endsWith(";") ? text.substring(0, text.length() - 1) : text);
    }
  }
}
