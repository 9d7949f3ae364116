import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Kafka's Java clients (kafka-clients 4.3) beyond the basics, for kopfka's tests:
 *   admin BOOTSTRAP TOPIC GROUP              describe/alter calls, one JSON line per call
 *   consume BOOTSTRAP TOPIC GROUP N K        K KIP-848 consumers share N records until the group settles; JSON summary
 *   produce BOOTSTRAP TOPIC N                an idempotent producer sends N records, 1 per ms;
 *                                            JSON line per acked record, then a summary
 */
public class ClientProbe {
    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "admin": admin(args[1], args[2], args[3]); break;
            case "consume": consume(args[1], args[2], args[3], Integer.parseInt(args[4]), Integer.parseInt(args[5])); break;
            case "produce": produce(args[1], args[2], Integer.parseInt(args[3])); break;
            default: throw new IllegalArgumentException(args[0]);
        }
    }

    interface Call { Object run() throws Exception; }

    /** The admin calls' topic config alter is visible (both of its changes: one record). */
    static boolean altered(Config c) {
        return "compact".equals(c.get("cleanup.policy").value())
                && c.get("retention.ms").source() != ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG;
    }

    static void emit(String name, Call call) {
        Map<String, Object> out = new TreeMap<>();
        out.put("call", name);
        try {
            out.put("ok", call.run());
        } catch (ExecutionException e) {
            out.put("error", e.getCause().getClass().getSimpleName());
            out.put("message", String.valueOf(e.getCause().getMessage()));
        } catch (Exception e) {
            out.put("error", e.getClass().getSimpleName());
            out.put("message", String.valueOf(e.getMessage()));
        }
        System.out.println(json(out));
        System.out.flush();
    }

    static void admin(String bootstrap, String topic, String group) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("default.api.timeout.ms", "30000");
        try (Admin a = Admin.create(p)) {
            TopicPartition tp0 = new TopicPartition(topic, 0);
            ConfigResource topicRes = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            emit("describeCluster", () -> {
                DescribeClusterResult r = a.describeCluster();
                return Map.of("clusterId", r.clusterId().get(), "controller", r.controller().get().id(),
                              "nodes", r.nodes().get().size());
            });
            emit("createTopics", () -> {
                a.createTopics(List.of(new NewTopic(topic, 2, (short) 1)
                        .configs(Map.of("retention.ms", "3600000")))).all().get();
                return "created";
            });
            emit("createTopicsAgain", () -> a.createTopics(List.of(new NewTopic(topic, 2, (short) 1))).all().get());
            emit("describeTopics", () -> {
                TopicDescription d = a.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
                return Map.of("partitions", d.partitions().size(), "leader0", d.partitions().get(0).leader().id(),
                              "internal", d.isInternal(), "topicId", d.topicId().toString());
            });
            emit("incrementalAlterConfigs", () -> {
                a.incrementalAlterConfigs(Map.of(topicRes, List.of(
                        new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.SET),
                        new AlterConfigOp(new ConfigEntry("retention.ms", null), AlterConfigOp.OpType.DELETE),
                        new AlterConfigOp(new ConfigEntry("min.cleanable.dirty.ratio", "0.2"), AlterConfigOp.OpType.SET)
                ))).all().get();
                return "altered";
            });
            emit("incrementalAlterConfigsInvalid", () -> a.incrementalAlterConfigs(Map.of(topicRes, List.of(
                    new AlterConfigOp(new ConfigEntry("min.cleanable.dirty.ratio", "7"), AlterConfigOp.OpType.SET))))
                    .all().get());
            emit("describeConfigs", () -> {
                // a broker answers from its metadata image, which applies the alter a moment after the
                // controller committed it (Kafka's had not yet, once, under pytest -n 4): wait, bounded
                Config c = a.describeConfigs(List.of(topicRes)).all().get().get(topicRes);
                for (int i = 0; i < 100 && !altered(c); i++) {
                    Thread.sleep(100);
                    c = a.describeConfigs(List.of(topicRes)).all().get().get(topicRes);
                }
                Map<String, Object> m = new TreeMap<>();
                for (String k : List.of("cleanup.policy", "retention.ms", "min.cleanable.dirty.ratio", "segment.bytes")) {
                    ConfigEntry e = c.get(k);
                    m.put(k, List.of(e.value(), e.source().name(), e.isReadOnly(), e.isSensitive()));
                }
                return m;
            });
            emit("describeBrokerConfigs", () -> {
                ConfigResource b = new ConfigResource(ConfigResource.Type.BROKER, "1");
                Config c = a.describeConfigs(List.of(b)).all().get().get(b);
                ConfigEntry e = c.get("log.retention.hours");
                return List.of(e.value(), e.source().name());
            });
            emit("createPartitions", () -> {
                a.createPartitions(Map.of(topic, NewPartitions.increaseTo(3))).all().get();
                return a.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().size();
            });
            emit("createPartitionsFewer", () -> a.createPartitions(Map.of(topic, NewPartitions.increaseTo(2))).all().get());
            try (KafkaProducer<String, String> prod = new KafkaProducer<>(producerProps(bootstrap))) {
                for (int i = 0; i < 10; i++) prod.send(new ProducerRecord<>(topic, 0, (long) (1000 + i), "k" + i, "v" + i)).get();
            }
            emit("listOffsets", () -> {
                Map<String, Object> m = new TreeMap<>();
                m.put("earliest", a.listOffsets(Map.of(tp0, OffsetSpec.earliest())).partitionResult(tp0).get().offset());
                m.put("latest", a.listOffsets(Map.of(tp0, OffsetSpec.latest())).partitionResult(tp0).get().offset());
                ListOffsetsResult.ListOffsetsResultInfo max = a.listOffsets(Map.of(tp0, OffsetSpec.maxTimestamp())).partitionResult(tp0).get();
                m.put("maxTimestamp", List.of(max.offset(), max.timestamp()));
                m.put("forTimestamp", a.listOffsets(Map.of(tp0, OffsetSpec.forTimestamp(1004))).partitionResult(tp0).get().offset());
                return m;
            });
            emit("deleteRecords", () -> a.deleteRecords(Map.of(tp0, RecordsToDelete.beforeOffset(3)))
                    .lowWatermarks().get(tp0).get().lowWatermark());
            emit("alterConsumerGroupOffsets", () -> {
                a.alterConsumerGroupOffsets(group, Map.of(tp0, new OffsetAndMetadata(7, "meta"))).all().get();
                OffsetAndMetadata o = a.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get().get(tp0);
                return List.of(o.offset(), o.metadata());
            });
            emit("describeConsumerGroups", () -> {
                ConsumerGroupDescription d = a.describeConsumerGroups(List.of(group)).all().get().get(group);
                return Map.of("state", d.groupState().toString(), "members", d.members().size(),
                              "coordinator", d.coordinator().id());
            });
            emit("deleteConsumerGroupOffsets", () -> {
                a.deleteConsumerGroupOffsets(group, Set.of(tp0)).all().get();
                return a.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get().size();
            });
            emit("describeLogDirs", () -> {
                Map<String, Object> m = new TreeMap<>();
                for (Map.Entry<String, LogDirDescription> e : a.describeLogDirs(List.of(1)).allDescriptions().get().get(1).entrySet()) {
                    ReplicaInfo ri = e.getValue().replicaInfos().get(tp0);
                    if (ri != null) m.put("size>0", ri.size() > 0);
                    m.put("totalBytes>0", e.getValue().totalBytes().orElse(0L) > 0);
                }
                return m;
            });
            emit("electLeaders", () -> a.electLeaders(ElectionType.PREFERRED, Set.of(tp0)).partitions().get()
                    .get(tp0).map(t -> t.getClass().getSimpleName()).orElse("none"));
            emit("listPartitionReassignments", () -> a.listPartitionReassignments().reassignments().get().size());
            emit("deleteTopics", () -> { a.deleteTopics(List.of(topic)).all().get(); return "deleted"; });
            emit("describeDeletedTopic", () -> a.describeTopics(List.of(topic)).allTopicNames().get());
        }
    }

    static Properties producerProps(String bootstrap) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        return p;
    }

    static void consume(String bootstrap, String topic, String group, int n, int k) throws Exception {
        Map<String, String> seen = new ConcurrentHashMap<>();
        List<String> duplicates = Collections.synchronizedList(new ArrayList<>());
        Map<Integer, Set<Integer>> assignments = new ConcurrentHashMap<>();
        AtomicBoolean done = new AtomicBoolean();
        AtomicReference<Map<Integer, Set<Integer>>> settledAt = new AtomicReference<>();
        List<Thread> threads = new ArrayList<>();
        List<String> errors = Collections.synchronizedList(new ArrayList<>());
        for (int c = 0; c < k; c++) {
            final int id = c;
            Thread t = new Thread(() -> {
                Properties p = new Properties();
                p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
                p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
                p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
                p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
                p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
                p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
                p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
                try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p)) {
                    consumer.subscribe(List.of(topic));
                    long deadline = System.currentTimeMillis() + 60_000;
                    while (!done.get() && System.currentTimeMillis() < deadline) {
                        for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                            String key = r.partition() + ":" + r.offset();
                            if (seen.put(key, r.value()) != null) duplicates.add(key);
                        }
                        Set<Integer> parts = new TreeSet<>();
                        for (TopicPartition tp : consumer.assignment()) parts.add(tp.partition());
                        assignments.put(id, parts);
                        consumer.commitSync();
                        int partitions = consumer.partitionsFor(topic).size();
                        // judged and reported on one copy: once a consumer stops, its leave hands
                        // its partitions to the other, whose next pass would record all of them
                        Map<Integer, Set<Integer>> now = new TreeMap<>(assignments);
                        if (seen.size() >= n && settled(now, k, partitions)) {
                            settledAt.compareAndSet(null, now);
                            done.set(true);
                        }
                    }
                } catch (Exception e) {
                    errors.add(e.toString());
                }
            });
            threads.add(t);
            t.start();
        }
        for (Thread t : threads) t.join();
        Map<String, Object> out = new TreeMap<>();
        out.put("consumed", seen.size());
        out.put("duplicates", duplicates.size());
        out.put("errors", errors);
        Map<String, Object> asg = new TreeMap<>();
        Map<Integer, Set<Integer>> last = settledAt.get() != null ? settledAt.get() : assignments;
        for (Map.Entry<Integer, Set<Integer>> e : last.entrySet()) asg.put(String.valueOf(e.getKey()), new ArrayList<>(e.getValue()));
        out.put("assignments", asg);
        List<String> values = new ArrayList<>(new TreeSet<>(seen.values()));
        out.put("values", values);
        System.out.println(json(out));
    }

    /** Every consumer holds partitions, none twice, all of them: the group has settled. */
    static boolean settled(Map<Integer, Set<Integer>> assignments, int k, int partitions) {
        if (assignments.size() < k) return false;
        Set<Integer> union = new TreeSet<>();
        int total = 0;
        for (Set<Integer> a : assignments.values()) {
            if (a.isEmpty()) return false;
            union.addAll(a);
            total += a.size();
        }
        return union.size() == partitions && total == partitions;
    }

    static void produce(String bootstrap, String topic, int n) throws Exception {
        Properties p = producerProps(bootstrap);
        p.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, "5");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "1");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "120000");
        p.put(ProducerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "200");
        List<String> errors = Collections.synchronizedList(new ArrayList<>());
        int[] acked = {0};
        try (KafkaProducer<String, String> prod = new KafkaProducer<>(p)) {
            for (int i = 0; i < n; i++) {
                final int seq = i;
                prod.send(new ProducerRecord<>(topic, 0, null, "v" + i), (md, e) -> {
                    if (e != null) errors.add(seq + ": " + e);
                    else synchronized (acked) { acked[0]++; System.out.println("{\"acked\": " + seq + ", \"offset\": " + md.offset() + "}"); }
                });
                Thread.sleep(1);
            }
            prod.flush();
        }
        System.out.println(json(new TreeMap<>(Map.of("acked_total", acked[0], "errors", errors))));
    }

    static String json(Object o) {
        if (o == null) return "null";
        if (o instanceof String) return "\"" + ((String) o).replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n") + "\"";
        if (o instanceof Number || o instanceof Boolean) return o.toString();
        if (o instanceof Optional) return json(((Optional<?>) o).orElse(null));
        if (o instanceof Map) {
            StringBuilder b = new StringBuilder("{");
            for (Map.Entry<?, ?> e : ((Map<?, ?>) o).entrySet()) {
                if (b.length() > 1) b.append(", ");
                b.append(json(String.valueOf(e.getKey()))).append(": ").append(json(e.getValue()));
            }
            return b.append("}").toString();
        }
        if (o instanceof Collection) {
            StringBuilder b = new StringBuilder("[");
            for (Object x : (Collection<?>) o) { if (b.length() > 1) b.append(", "); b.append(json(x)); }
            return b.append("]").toString();
        }
        return json(o.toString());
    }
}
