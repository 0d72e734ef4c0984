"""Socket paths: per-pod names stay short, long paths bind, undialable paths are refused."""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc.aio
import pytest
from dra_kubelet_core._proto import pluginregistration_v1_pb2 as pb
from dra_kubelet_core.errors import ConfigurationError
from dra_kubelet_core.registration import RegistrationServer, supported_versions
from dra_kubelet_core.sockets import (
    MAX_GRPC_BIND_PATH,
    MAX_SOCKET_PATH,
    SocketPaths,
    bind_unix,
    pod_token,
    short_socket_path,
)
from kubelet_plugin_support import PluginDirs, PluginProcess

DRIVER = "gpu.nvidia.com"
#: The e2e harness's kubelet root: ``<mkdtemp state dir>/nodes/<node>/kubelet``.
E2E_KUBELET_ROOT = Path("/tmp/dra-e2e-k2j4x9q1/nodes/e2e-node-0/kubelet")


@pytest.fixture
def long_dir() -> Iterator[Path]:
    """A directory whose path alone is longer than a unix socket address allows."""
    root = Path(tempfile.mkdtemp(prefix="kp-long-", dir="/tmp"))
    deep = root / ("x" * 60) / ("y" * 60)
    deep.mkdir(parents=True)
    assert len(os.fsencode(deep)) > MAX_SOCKET_PATH
    try:
        yield deep
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_per_pod_socket_names_fit_under_a_long_kubelet_root() -> None:
    uids = [str(uuid.uuid4()) for _ in range(2)]
    paths = [
        SocketPaths.build(
            driver_name=DRIVER,
            registrar_dir=E2E_KUBELET_ROOT / "plugins_registry",
            plugins_dir=E2E_KUBELET_ROOT / "plugins",
            pod_uid=uid,
        )
        for uid in uids
    ]
    for uid, p in zip(uids, paths, strict=True):
        token = uid.split("-")[0]
        assert p.registration.name == f"{DRIVER}-{token}-reg.sock"
        assert p.dra.name == f"dra-{token}.sock"
        assert len(os.fsencode(p.registration)) <= MAX_SOCKET_PATH
        assert len(os.fsencode(p.dra)) <= MAX_SOCKET_PATH
    assert paths[0].registration != paths[1].registration
    assert paths[0].dra != paths[1].dra


@pytest.mark.parametrize("bad", ["../../etc", "a/b", " "])
def test_pod_uid_that_is_no_file_name_is_refused(bad: str) -> None:
    with pytest.raises(ConfigurationError, match="--pod-uid"):
        pod_token(bad)


def test_short_alias_leaves_short_paths_alone_and_is_removed_after_use(long_dir: Path) -> None:
    short = Path("/tmp/x.sock")
    with short_socket_path(short) as same:
        assert same == short
    target = long_dir / "dra.sock"
    with short_socket_path(target) as alias:
        assert len(os.fsencode(alias)) <= MAX_SOCKET_PATH
        assert alias.parent.resolve() == long_dir.resolve()
    assert not alias.parent.exists()
    with pytest.raises(ConfigurationError, match="107"), short_socket_path(long_dir / ("z" * 120)):
        pass


@pytest.mark.parametrize("length", [MAX_GRPC_BIND_PATH, 106, MAX_SOCKET_PATH])
def test_grpc_binds_paths_up_to_the_unix_limit(length: int) -> None:
    """gRPC itself refuses 106 and 107 bytes; the alias makes those lengths bind too."""
    base = Path(tempfile.mkdtemp(prefix="kp-len-", dir="/tmp"))
    try:
        sub = "d" * (length - len(os.fsencode(base)) - 2 - len("dra.sock"))
        (base / sub).mkdir()
        path = base / sub / "dra.sock"
        assert len(os.fsencode(path)) == length

        async def scenario() -> None:
            server = grpc.aio.server()
            bind_unix(server, path)
            await server.start()
            try:
                assert stat.S_ISSOCK(os.lstat(path).st_mode)
            finally:
                await server.stop(None)

        asyncio.run(scenario())
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_registration_binds_at_a_long_path_and_reports_the_absolute_endpoint(
    long_dir: Path,
) -> None:
    socket_path = long_dir / f"{DRIVER}-reg.sock"
    endpoint = long_dir / DRIVER / "dra.sock"

    async def scenario() -> pb.PluginInfo:
        server = RegistrationServer(
            socket_path=socket_path,
            driver_name=DRIVER,
            endpoint=endpoint,
            versions=supported_versions(),
        )
        await server.start()
        try:
            assert stat.S_ISSOCK(os.lstat(socket_path).st_mode), "bound at the long path"
            with short_socket_path(socket_path) as dial:
                async with grpc.aio.insecure_channel(f"unix://{dial}") as channel:
                    get_info = channel.unary_unary(
                        "/pluginregistration.Registration/GetInfo",
                        request_serializer=pb.InfoRequest.SerializeToString,
                        response_deserializer=pb.PluginInfo.FromString,
                    )
                    info: pb.PluginInfo = await get_info(pb.InfoRequest(), timeout=10)
                    return info
        finally:
            await server.stop()

    info = asyncio.run(scenario())
    assert info.name == DRIVER
    assert info.endpoint == str(endpoint)
    assert not socket_path.exists(), "stop removes the socket"


def test_plugin_refuses_a_socket_path_the_kubelet_cannot_dial(long_dir: Path) -> None:
    dirs = PluginDirs(long_dir)
    proc = PluginProcess(dirs)
    with pytest.raises(RuntimeError, match="exited with 1") as err:
        proc.start(timeout_s=60)
    message = str(err.value)
    assert "--kubelet-registrar-directory-path" in message
    assert str(dirs.registration_socket()) in message
    assert f"allow {MAX_SOCKET_PATH} bytes" in message
    assert "Traceback" not in message
