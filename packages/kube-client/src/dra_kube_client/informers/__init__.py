"""Informers: list + watch caches of API collections (client-go's reflector, in Python).

```python
from dra_kube_client.informers import SharedInformers
from dra_kube_client import KubeTransport

informers = SharedInformers(KubeTransport.from_kubeconfig(fallback=True))
informers.start(stop)                      # one thread per collection
informers.wait_synced(60)
claims = informers.store("ResourceClaim").items()   # {"ns/name": raw v1 JSON}
```
"""

from ..backoff import Backoff
from .informer import Informer, InformerStats, WatchExpiredError
from .resources import ALL_RESOURCES, Resource, metadata_only, object_head, trim_pod
from .shared import SharedInformers
from .store import Listener, Store, object_key

__all__ = [
    "ALL_RESOURCES",
    "Backoff",
    "Informer",
    "InformerStats",
    "Listener",
    "Resource",
    "SharedInformers",
    "Store",
    "WatchExpiredError",
    "metadata_only",
    "object_head",
    "object_key",
    "trim_pod",
]
