import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.admin.FeatureUpdate;
import org.apache.kafka.clients.admin.ListConfigResourcesOptions;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.QuorumInfo;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.UpdateFeaturesOptions;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigResource;

/**
 * Kafka's own Java admin client (kafka-clients from Maven Central) against a broker, for tests.
 * Usage: AdminProbe BOOTSTRAP COMMAND ARG... [-- COMMAND ARG...]; prints one JSON object per
 * command: {"ok": result} or {"error": exception class, "message": ...}.
 */
public class AdminProbe {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, System.getProperty("api.timeout.ms", "30000"));
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, System.getProperty("request.timeout.ms", "15000"));
        List<List<String>> commands = new ArrayList<>();
        List<String> current = new ArrayList<>();
        for (String a : Arrays.asList(args).subList(1, args.length)) {
            if (a.equals("--")) { commands.add(current); current = new ArrayList<>(); } else { current.add(a); }
        }
        commands.add(current);
        try (Admin admin = Admin.create(props)) {
            for (List<String> cmd : commands) {
                Map<String, Object> out = new LinkedHashMap<>();
                long started = System.nanoTime();
                try {
                    out.put("ok", run(admin, cmd));
                } catch (ExecutionException e) {
                    out.put("error", e.getCause().getClass().getSimpleName());
                    out.put("message", e.getCause().getMessage());
                }
                out.put("elapsed_ms", (System.nanoTime() - started) / 1_000_000);
                System.out.println(json(out));
                System.out.flush();
            }
        }
    }

    static Object run(Admin admin, List<String> cmd) throws Exception {
        String op = cmd.get(0);
        switch (op) {
            case "describe-topics": {
                DescribeTopicsOptions opts = new DescribeTopicsOptions();
                if (cmd.size() > 2) opts.partitionSizeLimitPerResponse(Integer.parseInt(cmd.get(2)));
                Map<String, TopicDescription> topics =
                    admin.describeTopics(Arrays.asList(cmd.get(1).split(",")), opts).allTopicNames().get();
                Map<String, Object> out = new LinkedHashMap<>();
                for (TopicDescription t : topics.values()) {
                    List<Object> parts = new ArrayList<>();
                    for (TopicPartitionInfo p : t.partitions()) {
                        Map<String, Object> m = new LinkedHashMap<>();
                        m.put("partition", p.partition());
                        m.put("leader", p.leader() == null ? -1 : p.leader().id());
                        m.put("replicas", ids(p.replicas()));
                        m.put("isr", ids(p.isr()));
                        parts.add(m);
                    }
                    Map<String, Object> m = new LinkedHashMap<>();
                    m.put("topic_id", t.topicId().toString());
                    m.put("internal", t.isInternal());
                    m.put("partitions", parts);
                    out.put(t.name(), m);
                }
                return out;
            }
            case "describe-producers": {
                TopicPartition tp = new TopicPartition(cmd.get(1), Integer.parseInt(cmd.get(2)));
                List<Object> out = new ArrayList<>();
                for (ProducerState s : admin.describeProducers(List.of(tp)).partitionResult(tp).get().activeProducers()) {
                    Map<String, Object> m = new LinkedHashMap<>();
                    m.put("producer_id", s.producerId());
                    m.put("producer_epoch", s.producerEpoch());
                    m.put("last_sequence", s.lastSequence());
                    m.put("last_timestamp", s.lastTimestamp());
                    m.put("current_txn_start_offset", s.currentTransactionStartOffset().isPresent()
                        ? s.currentTransactionStartOffset().getAsLong() : -1);
                    out.add(m);
                }
                return out;
            }
            case "describe-quorum": {
                QuorumInfo q = admin.describeMetadataQuorum().quorumInfo().get();
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("leader_id", q.leaderId());
                m.put("leader_epoch", q.leaderEpoch());
                m.put("high_watermark", q.highWatermark());
                m.put("voters", replicas(q.voters()));
                m.put("observers", replicas(q.observers()));
                return m;
            }
            case "describe-features": {
                FeatureMetadata f = admin.describeFeatures().featureMetadata().get();
                Map<String, Object> fin = new LinkedHashMap<>();
                f.finalizedFeatures().forEach((k, v) -> fin.put(k, List.of(v.minVersionLevel(), v.maxVersionLevel())));
                Map<String, Object> sup = new LinkedHashMap<>();
                f.supportedFeatures().forEach((k, v) -> sup.put(k, List.of(v.minVersion(), v.maxVersion())));
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("finalized", fin);
                m.put("supported", sup);
                m.put("epoch", f.finalizedFeaturesEpoch().orElse(-1L));
                return m;
            }
            case "update-features": {  // update-features NAME=LEVEL[,..] UPGRADE|SAFE_DOWNGRADE|UNSAFE_DOWNGRADE [validate]
                Map<String, FeatureUpdate> updates = new LinkedHashMap<>();
                for (String kv : cmd.get(1).split(",")) {
                    String[] p = kv.split("=");
                    updates.put(p[0], new FeatureUpdate(Short.parseShort(p[1]),
                        FeatureUpdate.UpgradeType.valueOf(cmd.get(2))));
                }
                UpdateFeaturesOptions opts = new UpdateFeaturesOptions().validateOnly(cmd.size() > 3);
                admin.updateFeatures(updates, opts).all().get();
                return "updated";
            }
            case "list-config-resources": {  // list-config-resources [TYPE,...]
                Set<ConfigResource.Type> types = new HashSet<>();
                if (cmd.size() > 1) for (String t : cmd.get(1).split(",")) types.add(ConfigResource.Type.valueOf(t));
                List<Object> out = new ArrayList<>();
                for (ConfigResource r : admin.listConfigResources(types, new ListConfigResourcesOptions()).all().get()) {
                    out.add(List.of(r.type().name(), r.name()));
                }
                return out;
            }
            case "list-client-metrics-resources": {
                List<Object> out = new ArrayList<>();
                admin.listClientMetricsResources().all().get().forEach(r -> out.add(r.name()));
                return out;
            }
            case "list-offsets": {  // list-offsets TOPIC PARTITION
                TopicPartition tp = new TopicPartition(cmd.get(1), Integer.parseInt(cmd.get(2)));
                return admin.listOffsets(Map.of(tp, OffsetSpec.latest()), new ListOffsetsOptions())
                    .partitionResult(tp).get().offset();
            }
            case "remove-raft-voter": {  // remove-raft-voter ID DIRECTORY_ID
                admin.removeRaftVoter(Integer.parseInt(cmd.get(1)), Uuid.fromString(cmd.get(2))).all().get();
                return "removed";
            }
            case "sleep": {
                Thread.sleep(Long.parseLong(cmd.get(1)));
                return "slept";
            }
            default:
                throw new IllegalArgumentException("unknown command " + op);
        }
    }

    static List<Object> ids(List<Node> nodes) {
        List<Object> out = new ArrayList<>();
        for (Node n : nodes) out.add(n.id());
        return out;
    }

    static List<Object> replicas(List<QuorumInfo.ReplicaState> states) {
        List<Object> out = new ArrayList<>();
        for (QuorumInfo.ReplicaState s : states) out.add(List.of(s.replicaId(), s.logEndOffset()));
        return out;
    }

    static String json(Object o) {
        if (o == null) return "null";
        if (o instanceof Number || o instanceof Boolean) return o.toString();
        if (o instanceof Map) {
            StringBuilder b = new StringBuilder("{");
            for (Map.Entry<?, ?> e : ((Map<?, ?>) o).entrySet()) {
                if (b.length() > 1) b.append(',');
                b.append(json(String.valueOf(e.getKey()))).append(':').append(json(e.getValue()));
            }
            return b.append('}').toString();
        }
        if (o instanceof List) {
            StringBuilder b = new StringBuilder("[");
            for (Object e : (List<?>) o) {
                if (b.length() > 1) b.append(',');
                b.append(json(e));
            }
            return b.append(']').toString();
        }
        StringBuilder b = new StringBuilder("\"");
        for (char c : o.toString().toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }
}
