"""Container images as OCI archives, written without a registry, a daemon or root.

Build a layer, then write it as an archive that ``ctr images import``, ``podman load``,
``docker load`` and ``kind load image-archive`` all accept::

    from pathlib import Path
    from dra_oci import ImageConfig, LayerBuilder, write_archive

    layer = LayerBuilder()
    layer.add_file("etc/motd", b"hello\n", mode=0o644)
    write_archive(Path("motd.tar"), names=["example.com/motd:1"],
                  layers=[("motd", layer)], config=ImageConfig(cmd=["/bin/cat", "/etc/motd"]))

Everything is deterministic: the same inputs give the same image digest.
"""

from dra_oci.archive import (
    CREATED,
    EPOCH,
    MEDIA_CONFIG,
    MEDIA_INDEX,
    MEDIA_LAYER,
    MEDIA_MANIFEST,
    PATH_ENV,
    ImageConfig,
    LayerBuilder,
    PlatformImage,
    iter_layer_members,
    read_names,
    read_platforms,
    write_archive,
    write_index_archive,
)

__all__ = [
    "CREATED",
    "EPOCH",
    "MEDIA_CONFIG",
    "MEDIA_INDEX",
    "MEDIA_LAYER",
    "MEDIA_MANIFEST",
    "PATH_ENV",
    "ImageConfig",
    "LayerBuilder",
    "PlatformImage",
    "iter_layer_members",
    "read_names",
    "read_platforms",
    "write_archive",
    "write_index_archive",
]
