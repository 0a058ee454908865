"""``python -m jetlet_operator``: run the operator (kopf, standalone, the namespaces of the settings).

Flags after the module name go to ``kopf run`` (``--verbose``...). With the ``metrics_port``
setting, the operator serves ``/metrics`` and ``/healthz`` there (:mod:`jetlet_operator.metrics`).
"""

from __future__ import annotations

import os
import sys

from jetlet_operator import settings as settings_mod


def main(argv: list[str] | None = None) -> int:
    """Run kopf with the handlers of :mod:`jetlet_operator.handlers`."""
    import kopf.cli  # noqa: F401 - kopf's command line

    try:
        config = settings_mod.from_environ(os.environ)
    except settings_mod.SettingsError as exc:
        print(f"jetlet-operator: {exc}", file=sys.stderr)
        return 2
    args = ["run", "-m", "jetlet_operator.handlers", "--log-format=plain"]
    if config.standalone:
        args.append("--standalone")
    args += [f"--namespace={ns}" for ns in config.namespaces] or ["--all-namespaces"]
    if config.metrics_port:
        from jetlet_operator import handlers  # the module kopf runs: it serves from its start-up

        handlers.STATE.serve_port = config.metrics_port
    if config.log_level == "DEBUG":
        args.append("--debug")
    args += list(sys.argv[1:] if argv is None else argv)
    from kopf.cli import main as kopf_main

    try:
        kopf_main(args=args, prog_name="jetlet-operator", standalone_mode=False)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
