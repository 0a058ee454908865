"""The NEXMark benchmark harness: throughput and tail latency of jetlet next to its peers.

One job per module:

* :mod:`.jobs`: the measured job (fast source, a query, a recorder at the end), how it is
  submitted to an embedded instance or a local cluster, and how its counters are read;
* :mod:`.throughput`: the highest rate a query sustains (an unpaced run's events per second);
* :mod:`.latency`: latency at a fixed input rate, from each event's scheduled time to the result
  it triggers, and its percentiles;
* :mod:`.plain`: the plain-Python loop peer (each query as a tight loop over the same events);
* :mod:`.report`: the Markdown section of ``bench/RESULTS.md`` and the PNG plots;
* :mod:`.harness`: the command line (``jetlet bench nexmark``, ``python bench/nexmark.py``).
"""
