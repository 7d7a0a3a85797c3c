"""The controller: the domain of an OpenZiti-compatible network and the program that serves it.

Its packages, from the top of the import graph down (each imports only what is below it; ``pyproject.toml``'s
import contracts enforce this):

* ``cli``: the ``tollgate`` command, the operators' verbs and ``serve`` in one click group;
* ``admin``: the operators' command line, a Management API client (it imports resource specs, never the server);
* ``runtime``: the composition root, the task tree, settings, logs, metrics, bootstrap and ``serve``;
* ``cluster``: cluster mode on etcd: replicated writes, the local replica, the read barrier, membership, one network,
  identity shards with forwarding and fencing;
* ``insight``: the event log and its sinks (file, live streams), event queries, and the access explanation;
* ``maintenance``: database snapshots and the data-integrity check and its repairs;
* ``authentication``: API sessions, logins, enrolment, MFA, lockout and throttles;
* ``posture``: the identity actors (state machine, engine), posture rules and plans, the Client API's service views;
* ``resources``: one module per resource kind, each a :class:`controller.model.Resource` and its hooks;
* ``data``: the domain facade, the one write path, group commit, listing and presenting rows;
* ``access``: role selectors, policy links and what policies grant an identity;
* ``certificates`` and ``check_types``: the controller's PKI, and the bodies and OS version ranges of posture checks;
* ``model``: the resource spec machinery (``Resource``, ``Field``, contexts, the registry, request validation);
* ``errors``, ``ids``, ``clock``: the error table, resource ids, and wall-clock time derived from Trio's clock;
* ``etcd``: a Trio client of etcd's JSON gateway, for cluster mode; it imports nothing of the project.
"""
