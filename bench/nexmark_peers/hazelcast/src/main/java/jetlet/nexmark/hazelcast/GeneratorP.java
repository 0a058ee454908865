package jetlet.nexmark.hazelcast;

import com.hazelcast.jet.Traverser;
import com.hazelcast.jet.core.AbstractProcessor;
import com.hazelcast.jet.core.EventTimeMapper;
import com.hazelcast.jet.core.EventTimePolicy;
import com.hazelcast.jet.core.ProcessorMetaSupplier;
import com.hazelcast.jet.pipeline.Sources;
import com.hazelcast.jet.pipeline.StreamSource;

/**
 * Beam's generator as a Jet source that ends: processor {@code i} of {@code n} emits the event
 * numbers {@code i, i + n, ...} below {@code count}, each with its event time and the watermarks
 * of the stage's policy, then completes, and the job with it. (SourceBuilder's streaming sources
 * may not end; this is a Core API source, as Jet's own NEXMark benchmark has.)
 */
final class GeneratorP extends AbstractProcessor {
    private static final int EVENTS_PER_CALL = 128;
    private final long count;
    private final EventTimeMapper<Object> eventTime;
    private long next;
    private long step;
    private Traverser<Object> emitting;

    private GeneratorP(long count, EventTimePolicy<? super Object> policy) {
        this.count = count;
        this.eventTime = new EventTimeMapper<>(policy);
        eventTime.addPartitions(1);
    }

    /** The first {@code count} events, generated on every member by its cooperative threads. */
    static StreamSource<Object> source(long count) {
        int parallelism = Runtime.getRuntime().availableProcessors();
        return Sources.streamFromProcessorWithWatermarks("nexmark-generator", true,
            policy -> ProcessorMetaSupplier.of(parallelism, () -> new GeneratorP(count, policy)));
    }

    @Override
    protected void init(Context context) {
        next = context.globalProcessorIndex();
        step = context.totalParallelism();
    }

    @Override
    public boolean complete() {
        for (int i = 0; i < EVENTS_PER_CALL; i++) {
            if (emitting != null && !emitFromTraverser(emitting)) {
                return false;
            }
            emitting = null;
            if (next >= count) {
                return true;
            }
            emitting = eventTime.flatMapEvent(Generator.event(next), 0, Generator.timestamp(next));
            next += step;
        }
        return false;
    }
}
