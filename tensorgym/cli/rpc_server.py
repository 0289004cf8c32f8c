"""``tensorgym rpc-server --tracker HOST:PORT --key KEY``: serve this machine's CPU to tensorgym clients (TVM RPC)."""

from __future__ import annotations

import argparse
import logging

from tensorgym.errors import InvalidArgumentError


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "rpc-server", help="serve this machine's CPU to remote tuning runs (TVM RPC)",
        description="Register this machine with a TVM RPC tracker under KEY and check and time the kernels "
                    "that clients (gym.make(..., target=tensorgym.remote_target(tracker, key)), or --rpc "
                    "HOST:PORT/KEY) upload, one session at a time. Stop it with Ctrl-C or SIGTERM: every "
                    "process it started goes with it. Start the tracker with `python -m tvm.exec.rpc_tracker "
                    "--host 0.0.0.0 --port 9190`. TRUST: TVM RPC has no authentication: anyone who can reach "
                    "this server's port can upload and run any code on this machine as this user. By default "
                    "it listens only on the interface that reaches the tracker (127.0.0.1 for a tracker on "
                    "this machine), and it warns when it listens on a public address; run it on a trusted "
                    "network, or firewall its ports to the clients.")
    p.add_argument("--tracker", required=True, help="the tracker's HOST:PORT, e.g. 10.0.0.1:9190")
    p.add_argument("--key", required=True, help="the device key clients ask for, e.g. zen5")
    p.add_argument("--host", default=None,
                   help="address to listen on (default: the one this machine reaches the tracker from, 127.0.0.1 "
                        "for a local tracker; 0.0.0.0: every interface). No authentication: whoever reaches it "
                        "runs code here")
    p.add_argument("--port", type=int, default=9090, help="first port to try (default: 9090)")
    p.add_argument("--port-end", type=int, default=9199, help="last port to try, exclusive (default: 9199)")
    p.add_argument("--wait-tracker", type=float, default=30.0,
                   help="seconds to wait for the tracker to answer at start (default: 30)")
    p.add_argument("--custom-addr", default=None,
                   help="address the tracker gives clients (default: the one this server reaches it from); "
                        "give --host too when that is not the interface it listens on")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tensorgym.measure.rpc_server import default_host, serve
    from tensorgym.target import local_cpu

    host, colon, port = args.tracker.rpartition(":")
    if not colon or not host or not port.isdigit():
        raise InvalidArgumentError(f"--tracker is HOST:PORT (e.g. 127.0.0.1:9190), got {args.tracker!r}")
    if not args.key or "/" in args.key:
        raise InvalidArgumentError(f"--key is a name without '/', got {args.key!r}")
    if not 0 < args.port < args.port_end <= 65536:
        raise InvalidArgumentError(f"need 0 < --port < --port-end <= 65536, got {args.port}..{args.port_end}")
    tracker = (host, int(port))
    listen = args.host if args.host is not None else default_host(tracker)  # see serve(): trust
    logging.getLogger("tensorgym").setLevel(logging.INFO)
    cpu = local_cpu()

    def ready(listen_port: int) -> None:
        print(f"tensorgym rpc-server: {cpu.label} (fingerprint {cpu.fingerprint}) listening on "
              f"{listen}:{listen_port}, key {args.key!r} at tracker {args.tracker}", flush=True)

    return serve(tracker, args.key, host=listen, port=args.port, port_end=args.port_end,
                 custom_addr=args.custom_addr, on_ready=ready, tracker_timeout=args.wait_tracker)

