"""The network layer of a cluster member: the bytes on the wire between members.

A sans-IO core, tested without sockets, and one asyncio adapter:

* :mod:`~jetlet._network.serialization` turns values (control messages, map entries) into bytes
  and back (msgpack, with extension types for what msgpack cannot carry
  exactly and cloudpickle as the last resort, refused for unauthenticated
  data); the items of distributed edges travel as one pickle per packet
  (:mod:`~jetlet._network.tasklets`), only on authenticated connections;
* :mod:`~jetlet._network.frames` cuts the byte stream of one connection into
  length-prefixed, versioned, typed frames;
* :mod:`~jetlet._network.handshake` is the mutual challenge/response that
  admits only members holding the cluster secret;
* :mod:`~jetlet._network.flow_control` is Jet's adaptive receive window;
* :mod:`~jetlet._network.transport` runs one TCP connection per pair of
  members on an asyncio loop of its own thread.

The engine side (sender and receiver tasklets) lives in
:mod:`~jetlet._network.tasklets`.
"""
