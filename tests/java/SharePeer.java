import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.ShareMemberDescription;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Kafka's own share consumer (KafkaShareConsumer, kafka-clients 4.3) against a broker, for tests:
 * several scenarios in one JVM, since a JVM takes seconds to start. Usage: SharePeer BOOTSTRAP
 * COMMAND ARG... [-- COMMAND ARG...]; prints one JSON object per command ({"ok": ...} or
 * {"error": exception class, "message": ...}), through AdminProbe.json.
 */
public class SharePeer {
    static String bootstrap;

    public static void main(String[] args) throws Exception {
        bootstrap = args[0];
        List<List<String>> commands = new ArrayList<>();
        List<String> current = new ArrayList<>();
        for (String a : Arrays.asList(args).subList(1, args.length)) {
            if (a.equals("--")) { commands.add(current); current = new ArrayList<>(); } else { current.add(a); }
        }
        commands.add(current);
        for (List<String> cmd : commands) {
            Map<String, Object> out = new LinkedHashMap<>();
            long started = System.nanoTime();
            try {
                out.put("ok", run(cmd));
            } catch (ExecutionException e) {
                out.put("error", e.getCause().getClass().getSimpleName());
                out.put("message", e.getCause().getMessage());
            } catch (RuntimeException e) {
                out.put("error", e.getClass().getSimpleName());
                out.put("message", e.getMessage());
            }
            out.put("elapsed_ms", (System.nanoTime() - started) / 1_000_000);
            System.out.println(AdminProbe.json(out));
            System.out.flush();
        }
    }

    static Admin admin() {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        return Admin.create(p);
    }

    static KafkaShareConsumer<String, String> consumer(String group, String mode) {
        return consumer(group, mode, 500);
    }

    static KafkaShareConsumer<String, String> consumer(String group, String mode, int maxPollRecords) {
        Properties p = new Properties();
        p.put("max.poll.records", Integer.toString(maxPollRecords));
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("share.acknowledgement.mode", mode);
        p.put("client.id", "share-peer-" + group);
        return new KafkaShareConsumer<>(p, new StringDeserializer(), new StringDeserializer());
    }

    /** One record a batch (each send waits), so a share fetch can acquire a few of them at a time. */
    static int produce(String topic, int n, String prefix) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("acks", "all");
        p.put("linger.ms", "0");
        try (KafkaProducer<String, String> producer =
                 new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
            int partitions = producer.partitionsFor(topic).size();
            for (int i = 0; i < n; i++) {
                producer.send(new ProducerRecord<>(topic, i % partitions, null, prefix + i)).get();
            }
        }
        return n;
    }

    static Object run(List<String> cmd) throws Exception {
        switch (cmd.get(0)) {
            case "produce": {  // produce TOPIC COUNT [PREFIX]: values PREFIX0..PREFIX(COUNT-1), partitions in turn
                return produce(cmd.get(1), Integer.parseInt(cmd.get(2)), cmd.size() > 3 ? cmd.get(3) : "v");
            }
            case "group-config": {  // group-config GROUP KEY=VALUE[,KEY=VALUE...]
                List<AlterConfigOp> ops = new ArrayList<>();
                for (String kv : cmd.get(2).split(",")) {
                    String[] parts = kv.split("=", 2);
                    ops.add(new AlterConfigOp(new ConfigEntry(parts[0], parts[1]), AlterConfigOp.OpType.SET));
                }
                try (Admin admin = admin()) {
                    admin.incrementalAlterConfigs(Map.of(new ConfigResource(ConfigResource.Type.GROUP, cmd.get(1)), ops))
                        .all().get();
                }
                return "altered";
            }
            case "share": {  // share GROUP TOPIC CONSUMERS DISTINCT TIMEOUT_MS: produces DISTINCT once all hold partitions
                return share(cmd.get(1), cmd.get(2), Integer.parseInt(cmd.get(3)), Integer.parseInt(cmd.get(4)),
                             Long.parseLong(cmd.get(5)));
            }
            case "release-then-accept": {  // release-then-accept GROUP TOPIC COUNT
                return releaseThenAccept(cmd.get(1), cmd.get(2), Integer.parseInt(cmd.get(3)));
            }
            case "release-until-archived": {  // release-until-archived GROUP TOPIC: RELEASE every delivery
                return releaseUntilArchived(cmd.get(1), cmd.get(2));
            }
            case "lock-timeout": {  // lock-timeout GROUP TOPIC COUNT HOLD_MS: A holds without acknowledging, B gets them
                return lockTimeout(cmd.get(1), cmd.get(2), Integer.parseInt(cmd.get(3)), Long.parseLong(cmd.get(4)));
            }
            case "describe": {  // describe GROUP
                try (Admin admin = admin()) {
                    ShareGroupDescription d = admin.describeShareGroups(List.of(cmd.get(1))).all().get().get(cmd.get(1));
                    Map<String, Object> out = new LinkedHashMap<>();
                    out.put("state", d.groupState().toString());
                    out.put("epoch", d.groupEpoch());
                    List<Object> members = new ArrayList<>();
                    for (ShareMemberDescription m : d.members()) {
                        List<Object> tps = new ArrayList<>();
                        for (TopicPartition tp : m.assignment().topicPartitions()) tps.add(tp.toString());
                        members.add(Map.of("client_id", m.clientId(), "assignment", tps));
                    }
                    out.put("members", members);
                    return out;
                }
            }
            case "offsets": {  // offsets GROUP: start offset and lag per partition
                try (Admin admin = admin()) {
                    Map<TopicPartition, SharePartitionOffsetInfo> offsets =
                        admin.listShareGroupOffsets(Map.of(cmd.get(1), new org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec()))
                            .partitionsToOffsetInfo(cmd.get(1)).get();
                    Map<String, Object> out = new TreeMap<>();
                    for (Map.Entry<TopicPartition, SharePartitionOffsetInfo> e : offsets.entrySet()) {
                        SharePartitionOffsetInfo i = e.getValue();
                        out.put(e.getKey().toString(), i == null ? null : List.of(i.startOffset(), i.lag().orElse(-1L)));
                    }
                    return out;
                }
            }
            case "list-share-groups": {
                try (Admin admin = admin()) {
                    List<Object> out = new ArrayList<>();
                    for (GroupListing g : admin.listGroups(ListGroupsOptions.forShareGroups()).all().get()) {
                        out.add(List.of(g.groupId(), g.groupState().map(Object::toString).orElse("?")));
                    }
                    return out;
                }
            }
            case "delete-group": {  // delete-group GROUP
                try (Admin admin = admin()) {
                    admin.deleteShareGroups(List.of(cmd.get(1))).all().get();
                    return "deleted";
                }
            }
            default:
                throw new IllegalArgumentException("unknown command " + cmd.get(0));
        }
    }

    /**
     * CONSUMERS share consumers in threads (implicit acknowledgement, a few records a poll) poll until DISTINCT
     * different values were received. The records are produced only once the group's description shows every
     * member with an assignment: produced earlier, the first consumer to join could take them all.
     */
    static Object share(String group, String topic, int consumers, int distinct, long timeoutMs) throws Exception {
        Map<String, Integer> deliveries = new ConcurrentHashMap<>();
        Map<Integer, Integer> perConsumer = new ConcurrentHashMap<>();
        Map<Integer, List<Integer>> partitionsSeen = new ConcurrentHashMap<>();
        long deadline = System.currentTimeMillis() + timeoutMs;
        List<Thread> threads = new ArrayList<>();
        for (int c = 0; c < consumers; c++) {
            final int id = c;
            perConsumer.put(id, 0);
            Thread t = new Thread(() -> {
                try (KafkaShareConsumer<String, String> consumer = consumer(group, "implicit", 5)) {
                    consumer.subscribe(List.of(topic));
                    while (deliveries.size() < distinct && System.currentTimeMillis() < deadline) {
                        ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                        for (ConsumerRecord<String, String> r : records) {
                            deliveries.merge(r.value(), 1, Integer::sum);
                            perConsumer.merge(id, 1, Integer::sum);
                            partitionsSeen.computeIfAbsent(id, k -> new ArrayList<>());
                            if (!partitionsSeen.get(id).contains(r.partition())) partitionsSeen.get(id).add(r.partition());
                        }
                    }
                    consumer.commitSync();
                }
            });
            t.start();
            threads.add(t);
        }
        int assigned = 0;
        try (Admin admin = admin()) {
            while (System.currentTimeMillis() < deadline) {
                assigned = 0;
                try {
                    ShareGroupDescription d = admin.describeShareGroups(List.of(group)).all().get().get(group);
                    for (ShareMemberDescription m : d.members()) if (!m.assignment().topicPartitions().isEmpty()) assigned++;
                } catch (ExecutionException e) {
                    // GroupIdNotFoundException until the first consumer's heartbeat created the group
                }
                if (assigned == consumers) break;
                Thread.sleep(100);
            }
        }
        produce(topic, distinct, "v");
        for (Thread t : threads) t.join();
        int total = 0;
        int duplicates = 0;
        for (int n : deliveries.values()) { total += n; if (n > 1) duplicates++; }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("assigned_before_produce", assigned);
        out.put("distinct", deliveries.size());
        out.put("deliveries", total);
        out.put("duplicated", duplicates);
        out.put("per_consumer", new TreeMap<>(perConsumer));
        out.put("partitions", new TreeMap<>(partitionsSeen));
        return out;
    }

    static List<ConsumerRecord<String, String>> pollFor(KafkaShareConsumer<String, String> c, int count, long timeoutMs) {
        List<ConsumerRecord<String, String>> got = new ArrayList<>();
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (got.size() < count && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) got.add(r);
            if (got.size() < count && !got.isEmpty()) break;  // explicit mode: acknowledge before polling again
        }
        return got;
    }

    /** A releases COUNT records; B receives them again with delivery count 2 and accepts them. */
    static Object releaseThenAccept(String group, String topic, int count) throws Exception {
        Map<String, Object> out = new LinkedHashMap<>();
        try (KafkaShareConsumer<String, String> a = consumer(group, "explicit")) {
            a.subscribe(List.of(topic));
            List<ConsumerRecord<String, String>> first = pollFor(a, count, 20000);
            for (ConsumerRecord<String, String> r : first) a.acknowledge(r, AcknowledgeType.RELEASE);
            a.commitSync();
            out.put("first", counts(first));
        }
        try (KafkaShareConsumer<String, String> b = consumer(group, "explicit")) {
            b.subscribe(List.of(topic));
            List<ConsumerRecord<String, String>> again = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 20000;
            while (again.size() < count && System.currentTimeMillis() < deadline) {
                List<ConsumerRecord<String, String>> batch = pollFor(b, count - again.size(), 2000);
                for (ConsumerRecord<String, String> r : batch) b.acknowledge(r, AcknowledgeType.ACCEPT);
                b.commitSync();
                again.addAll(batch);
            }
            out.put("again", counts(again));
            List<ConsumerRecord<String, String>> after = pollFor(b, 1, 1500);
            out.put("after_accept", after.size());
        }
        return out;
    }

    /** One record RELEASEd on every delivery: delivered share.delivery.count.limit times, then archived. */
    static Object releaseUntilArchived(String group, String topic) throws Exception {
        List<Integer> counts = new ArrayList<>();
        try (KafkaShareConsumer<String, String> c = consumer(group, "explicit")) {
            c.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 30000;
            int empty = 0;
            while (System.currentTimeMillis() < deadline && empty < 8) {
                List<ConsumerRecord<String, String>> got = pollFor(c, 1, 500);
                if (got.isEmpty()) { if (!counts.isEmpty()) empty++; continue; }
                empty = 0;
                for (ConsumerRecord<String, String> r : got) {
                    counts.add((int) r.deliveryCount().orElse((short) -1));
                    c.acknowledge(r, AcknowledgeType.RELEASE);
                }
                c.commitSync();
            }
        }
        return counts;
    }

    /** A acquires COUNT records and holds them HOLD_MS without acknowledging; B then gets them, and
     * A's late acknowledgement is refused while B holds them. */
    static Object lockTimeout(String group, String topic, int count, long holdMs) throws Exception {
        Map<String, Object> out = new LinkedHashMap<>();
        try (KafkaShareConsumer<String, String> a = consumer(group, "explicit");
             KafkaShareConsumer<String, String> b = consumer(group, "explicit")) {
            a.subscribe(List.of(topic));
            List<ConsumerRecord<String, String>> held = pollFor(a, count, 20000);
            out.put("held", counts(held));
            out.put("lock_ms", a.acquisitionLockTimeoutMs().orElse(-1));
            b.subscribe(List.of(topic));
            List<ConsumerRecord<String, String>> early = pollFor(b, 1, 1000);
            out.put("b_before_expiry", early.size());
            Thread.sleep(holdMs);
            List<ConsumerRecord<String, String>> got = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 20000;
            while (got.size() < held.size() && System.currentTimeMillis() < deadline) {
                got.addAll(pollFor(b, held.size() - got.size(), 2000));
            }
            out.put("b_after_expiry", counts(got));
            // A's late acknowledgement is refused: the records are B's now
            for (ConsumerRecord<String, String> r : held) a.acknowledge(r, AcknowledgeType.ACCEPT);
            Map<String, Object> errors = new TreeMap<>();
            a.commitSync().forEach((tp, e) -> errors.put(tp.topic() + "-" + tp.partition(),
                                                       e.map(x -> x.getClass().getSimpleName()).orElse("none")));
            out.put("late_ack", errors);
            for (ConsumerRecord<String, String> r : got) b.acknowledge(r, AcknowledgeType.ACCEPT);
            Map<String, Object> accepted = new TreeMap<>();
            b.commitSync().forEach((tp, e) -> accepted.put(tp.topic() + "-" + tp.partition(),
                                                         e.map(x -> x.getClass().getSimpleName()).orElse("none")));
            out.put("b_ack", accepted);
        }
        return out;
    }

    /** value -> delivery count of each record. */
    static Map<String, Object> counts(Collection<ConsumerRecord<String, String>> records) {
        Map<String, Object> out = new TreeMap<>();
        for (ConsumerRecord<String, String> r : records) out.put(r.value(), (int) r.deliveryCount().orElse((short) -1));
        return out;
    }
}
