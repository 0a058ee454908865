package jetlet.nexmark.hazelcast;

import com.hazelcast.config.Config;
import com.hazelcast.config.JoinConfig;
import com.hazelcast.config.NetworkConfig;
import com.hazelcast.core.Hazelcast;
import com.hazelcast.core.HazelcastInstance;
import com.hazelcast.instance.BuildInfoProvider;
import com.hazelcast.jet.pipeline.Pipeline;

import java.io.IOException;
import java.io.Writer;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * Runs one NEXMark query on Hazelcast Jet and writes a JSON report and the canonical rows.
 *
 * <p>{@code --query q5 --events N --members 1|2 --out-json R --rows-file F}: starts an embedded
 * member (and, for 2 members, a second JVM running this class with {@code --member}, joined by
 * TCP-IP on 127.0.0.1, multicast off), reports that start-up apart, runs the same query once
 * untimed over the first {@code --warmup-events} events (the JIT's warm-up), then times one job from
 * submission to completion: the generator source, the query, an IList sink, and the CPU time the
 * JVMs spent meanwhile (a figure the machine's load moves far less than the wall clock). The rows
 * are read back and written (JSON lines) after the timing. The second member lives until its stdin
 * closes.
 */
public final class NexmarkPeer {
    private static final Logger HAZELCAST_LOG = Logger.getLogger("com.hazelcast");
    private static final long JOIN_TIMEOUT_MS = 120_000;
    private static final int FIRST_PORT = 5701;

    private NexmarkPeer() {
    }

    public static void main(String[] argv) throws Exception {
        HAZELCAST_LOG.setLevel(Level.WARNING);
        Map<String, String> args = parse(argv);
        if (args.containsKey("member")) {
            runMember(args.get("cluster"), Integer.parseInt(args.get("join")));
            return;
        }
        String query = args.get("query");
        if (!Queries.NAMES.contains(query)) {
            throw new IllegalArgumentException("unknown query " + query);
        }
        long count = Long.parseLong(args.get("events"));
        int members = Integer.parseInt(args.getOrDefault("members", "1"));
        if (members != 1 && members != 2) {
            throw new IllegalArgumentException("--members is 1 or 2, got " + members);
        }
        String cluster = "nexmark-" + ProcessHandle.current().pid();
        HazelcastInstance first = Hazelcast.newHazelcastInstance(config(cluster, FIRST_PORT,
            members == 2 ? FIRST_PORT : null));
        Process second = members == 2 ? startMember(cluster, first.getCluster().getLocalMember().getAddress().getPort())
            : null;
        try {
            awaitMembers(first, members);
            double startup = ManagementFactory.getRuntimeMXBean().getUptime() / 1000.0;
            long windowMs = Long.parseLong(args.getOrDefault("window-ms", "10000"));
            long slideMs = Long.parseLong(args.getOrDefault("slide-ms", "1000"));
            long warmupEvents = Long.parseLong(args.getOrDefault("warmup-events", "0"));
            long warmupStarted = System.nanoTime();
            if (warmupEvents > 0) {
                first.getJet().newJob(Queries.pipeline(query, warmupEvents, windowMs, slideMs, "nexmark-warmup"))
                    .join();
                first.getList("nexmark-warmup").destroy();
            }
            double warmupSeconds = (System.nanoTime() - warmupStarted) / 1e9;
            String results = "nexmark-results-" + query;
            Pipeline pipeline = Queries.pipeline(query, count, windowMs, slideMs, results);
            long cpuBefore = cpuNanos(second);
            long began = System.nanoTime();
            first.getJet().newJob(pipeline).join();
            double seconds = (System.nanoTime() - began) / 1e9;
            double cpuSeconds = (cpuNanos(second) - cpuBefore) / 1e9;
            List<Object[]> emitted = new ArrayList<>(first.<Object[]>getList(results));
            List<Object[]> rows = Queries.canonical(query, emitted, Generator.timestamp(count - 1));
            writeRows(Path.of(args.get("rows-file")), rows);
            Map<String, Object> report = new LinkedHashMap<>();
            report.put("peer", members == 2 ? "hazelcast2" : "hazelcast");
            report.put("query", query);
            report.put("events", count);
            report.put("members", members);
            report.put("seconds", seconds);
            report.put("events_per_s", seconds > 0 ? count / seconds : null);
            report.put("cpu_s", cpuSeconds);
            report.put("startup_s", startup);
            report.put("warmup_events", warmupEvents);
            report.put("warmup_s", warmupSeconds);
            report.put("emitted", emitted.size());
            report.put("results", rows.size());
            report.put("rows_file", args.get("rows-file"));
            report.put("versions", Map.of("hazelcast", BuildInfoProvider.getBuildInfo().getVersion(),
                "java", System.getProperty("java.runtime.version")));
            Files.writeString(Path.of(args.get("out-json")), Json.object(report) + "\n");
        } finally {
            if (second != null) {
                second.getOutputStream().close();
                second.waitFor();
            }
            Hazelcast.shutdownAll();
        }
    }

    /** The CPU time of this JVM and of the second member's, if any (user + system). */
    private static long cpuNanos(Process second) {
        long own = ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
            .getProcessCpuTime();
        return own + (second == null ? 0 : second.info().totalCpuDuration().map(Duration::toNanos).orElse(0L));
    }

    private static Map<String, String> parse(String[] argv) {
        Map<String, String> args = new HashMap<>();
        for (int i = 0; i < argv.length; i++) {
            String name = argv[i].replaceFirst("^--", "");
            boolean flag = i + 1 >= argv.length || argv[i + 1].startsWith("--");
            args.put(name, flag ? "" : argv[++i]);
        }
        return args;
    }

    /**
     * A member of {@code cluster} on 127.0.0.1 from {@code port} up; with a {@code joinPort}, TCP-IP
     * join to 127.0.0.1 there (both members must use TCP-IP), without, a standalone member.
     */
    static Config config(String cluster, int port, Integer joinPort) {
        Config config = new Config();
        config.setClusterName(cluster);
        config.setProperty("hazelcast.phone.home.enabled", "false");
        config.setProperty("hazelcast.logging.type", "jdk");
        config.setProperty("hazelcast.socket.bind.any", "false");
        config.setProperty("hazelcast.wait.seconds.before.join", "0");
        config.getJetConfig().setEnabled(true);
        config.getListConfig("nexmark-*").setBackupCount(0);
        NetworkConfig network = config.getNetworkConfig();
        network.setPort(port).setPortAutoIncrement(true).setPortCount(200);
        network.getInterfaces().setEnabled(true).addInterface("127.0.0.1");
        JoinConfig join = network.getJoin();
        join.getMulticastConfig().setEnabled(false);
        join.getAutoDetectionConfig().setEnabled(false);
        join.getTcpIpConfig().setEnabled(joinPort != null);
        if (joinPort != null) {
            join.getTcpIpConfig().addMember("127.0.0.1:" + joinPort);
        }
        return config;
    }

    /** The second member: joins the first, then lives until its stdin closes. */
    private static void runMember(String cluster, int joinPort) throws IOException {
        Hazelcast.newHazelcastInstance(config(cluster, joinPort + 1, joinPort));
        while (System.in.read() >= 0) {
            continue;
        }
        Hazelcast.shutdownAll();
    }

    private static Process startMember(String cluster, int joinPort) throws IOException {
        List<String> command = new ArrayList<>();
        command.add(ProcessHandle.current().info().command().orElse("java"));
        command.addAll(ManagementFactory.getRuntimeMXBean().getInputArguments());
        command.addAll(List.of("-cp", System.getProperty("java.class.path"), NexmarkPeer.class.getName(), "--member",
            "--cluster", cluster, "--join", Integer.toString(joinPort)));
        return new ProcessBuilder(command).redirectOutput(ProcessBuilder.Redirect.INHERIT)
            .redirectError(ProcessBuilder.Redirect.INHERIT).start();
    }

    private static void awaitMembers(HazelcastInstance instance, int members) throws InterruptedException {
        long deadline = System.currentTimeMillis() + JOIN_TIMEOUT_MS;
        while (instance.getCluster().getMembers().size() < members) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("the cluster did not reach " + members + " members");
            }
            Thread.sleep(50);
        }
    }

    private static void writeRows(Path path, List<Object[]> rows) throws IOException {
        try (Writer out = Files.newBufferedWriter(path, StandardCharsets.UTF_8)) {
            for (Object[] row : rows) {
                out.write(Json.array(row));
                out.write('\n');
            }
        }
    }
}
