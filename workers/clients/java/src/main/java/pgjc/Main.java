package pgjc;

import java.util.Arrays;
import java.util.Map;
import java.util.concurrent.Callable;

/**
 * The jar's entry: {@code java -jar pgjc.jar COMMAND [ARGS...] SUBCOMMAND}, COMMAND one of {@link
 * #COMMANDS} (the harness appends the subcommand to the command's words, as for pgjc.go's Main).
 */
public final class Main {
  private Main() {}

  interface Command {
    Map<String, Callable<Void>> subcommands(String[] args) throws Exception;
  }

  static final Map<String, java.util.function.Supplier<Command>> COMMANDS =
      Map.of("reference", Reference::new, "db-scheduler", DbScheduler::new);

  public static void main(String[] argv) {
    var make = argv.length > 0 ? COMMANDS.get(argv[0]) : null;
    Command command = make == null ? null : make.get();
    if (command == null || argv.length < 2) {
      System.err.println("usage: java -jar pgjc.jar {" + String.join("|", COMMANDS.keySet()) + "} [ARGS...] SUBCOMMAND");
      System.exit(2);
    }
    String name = argv[argv.length - 1];
    int code;
    try {
      Map<String, Callable<Void>> subs = command.subcommands(Arrays.copyOfRange(argv, 1, argv.length - 1));
      Callable<Void> sub = subs.get(name);
      if (sub == null) {
        System.err.println("usage: " + argv[0] + " {" + String.join("|", subs.keySet()) + "}");
        System.exit(2);
      }
      sub.call();
      code = 0;
    } catch (Exception e) {
      System.err.println(name + ": " + e);
      e.printStackTrace();
      code = 70;
    }
    System.out.flush();
    Runtime.getRuntime().halt(code); // no shutdown hook runs: the queue's own stop has run, or exit 70
  }

  /** Writes one answer line on stdout. */
  static void emit(Object record) {
    try {
      System.out.println(Client.JSON.writeValueAsString(record));
      System.out.flush();
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }
}
