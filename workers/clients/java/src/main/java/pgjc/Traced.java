package pgjc;

import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.Statement;
import java.util.Set;
import javax.sql.DataSource;

/**
 * Statement points for a queue's own JDBC statements: a DataSource whose connections hand out
 * statements that call {@link Client#statement} before each execution -- a PreparedStatement's
 * execute, executeQuery, executeUpdate and executeBatch with the text it was prepared with, a plain
 * Statement's with the text it is given. Held there, before PgJDBC writes anything: the
 * supervisor's pause reaches a statement of the queue's own. The body's connections are not traced.
 */
final class Traced {
  private Traced() {}

  private static final Set<String> EXECUTES =
      Set.of("execute", "executeQuery", "executeUpdate", "executeLargeUpdate", "executeBatch", "executeLargeBatch");

  /** dataSource with every connection traced for client. */
  static DataSource dataSource(DataSource dataSource, Client client) {
    return (DataSource) Proxy.newProxyInstance(Traced.class.getClassLoader(), new Class<?>[] {DataSource.class},
        (proxy, m, args) -> {
          Object out = call(dataSource, m, args);
          return out instanceof Connection conn ? connection(conn, client) : out;
        });
  }

  static Connection connection(Connection conn, Client client) {
    InvocationHandler h = (proxy, m, args) -> {
      Object out = call(conn, m, args);
      if (out instanceof PreparedStatement ps && m.getName().equals("prepareStatement")) {
        return statement(ps, PreparedStatement.class, (String) args[0], conn, client);
      }
      if (out instanceof Statement st && m.getName().equals("createStatement")) {
        return statement(st, Statement.class, null, conn, client);
      }
      return out;
    };
    return (Connection) Proxy.newProxyInstance(Traced.class.getClassLoader(), new Class<?>[] {Connection.class}, h);
  }

  private static <T extends Statement> T statement(T st, Class<T> type, String prepared, Connection conn,
                                                   Client client) {
    InvocationHandler h = (proxy, m, args) -> {
      if (EXECUTES.contains(m.getName())) {
        String text = prepared != null ? prepared : args != null && args.length > 0 && args[0] instanceof String s ? s : null;
        if (text != null) {
          client.statement(text, conn);
        }
      }
      return call(st, m, args);
    };
    return type.cast(Proxy.newProxyInstance(Traced.class.getClassLoader(), new Class<?>[] {type}, h));
  }

  private static Object call(Object target, Method m, Object[] args) throws Throwable {
    try {
      return m.invoke(target, args);
    } catch (InvocationTargetException e) {
      throw e.getCause();
    }
  }
}
