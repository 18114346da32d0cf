import com.github.kagkarlsson.scheduler.SchedulerName;
import com.github.kagkarlsson.scheduler.SystemClock;
import com.github.kagkarlsson.scheduler.TaskResolver;
import com.github.kagkarlsson.scheduler.event.SchedulerListeners;
import com.github.kagkarlsson.scheduler.jdbc.JdbcTaskRepository;
import com.github.kagkarlsson.scheduler.jdbc.PostgreSqlJdbcCustomization;
import com.github.kagkarlsson.scheduler.serializer.Serializer;
import com.github.kagkarlsson.scheduler.task.Execution;
import com.github.kagkarlsson.scheduler.task.TaskInstance;
import com.github.kagkarlsson.scheduler.task.helper.Tasks;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.time.Instant;
import java.util.List;
import javax.sql.DataSource;

/**
 * Prints, one a line, the text of each statement db-scheduler's dead-execution detection sends, as its own
 * JdbcTaskRepository builds it: getDeadExecutions (Scheduler.detectDeadExecutions) and the reschedule
 * ReviveDeadExecution makes through ExecutionOperations.reschedule. The repository is built as
 * SchedulerBuilder.build builds it (the default table, no priority), on a DataSource whose connections
 * print the text handed to prepareStatement and then refuse it: nothing is connected.
 * Run by tests/unit/test_recovery_statements.py as {@code java -cp pgjc.jar DbSchedulerRecovery.java}.
 */
public class DbSchedulerRecovery {
  static final class Captured extends RuntimeException {
    Captured() {
      super("captured");
    }
  }

  public static void main(String[] args) {
    Connection conn = (Connection) Proxy.newProxyInstance(DbSchedulerRecovery.class.getClassLoader(),
        new Class<?>[] {Connection.class}, (p, m, a) -> {
          if (m.getName().equals("prepareStatement")) {
            System.out.println(((String) a[0]).replace('\n', ' '));
            throw new Captured();
          }
          return m.getReturnType() == boolean.class ? Boolean.TRUE : null;  // getAutoCommit: true
        });
    DataSource ds = (DataSource) Proxy.newProxyInstance(DbSchedulerRecovery.class.getClassLoader(),
        new Class<?>[] {DataSource.class}, (p, m, a) -> m.getName().equals("getConnection") ? conn : null);
    var task = Tasks.oneTime("pgjc", String.class).execute((instance, ctx) -> {});
    var clock = new SystemClock();
    var resolver = new TaskResolver(new SchedulerListeners(List.of()), clock, List.of(task));
    var repo = new JdbcTaskRepository(ds, false, new PostgreSqlJdbcCustomization(false, false),
        JdbcTaskRepository.DEFAULT_TABLE_NAME, resolver, new SchedulerName.Fixed("w1"),
        Serializer.DEFAULT_JAVA_SERIALIZER, false, clock);
    try {
      repo.getDeadExecutions(Instant.now());
    } catch (RuntimeException e) {
      // Captured, or the shaded JdbcRunner's wrapping of it: the statement is printed
    }
    var dead = new Execution(Instant.now(), new TaskInstance<>("pgjc", "1", "{}"), true, "w1", Instant.now(),
        null, 0, null, 1L);
    try {
      repo.reschedule(dead, Instant.now(), null, Instant.now(), 1);
    } catch (RuntimeException e) {
      // as above
    }
  }
}
