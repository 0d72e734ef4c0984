"""ComputeDomains for Multi-Node NVLink: controller, domain daemon, kubelet plugin parts.

Pure logic (:mod:`.manifests`, :mod:`.reconcile`, :mod:`.status`, :mod:`.clique`,
:mod:`.hosts`, :mod:`.imex_config`, :mod:`.clique_id`) has no I/O; :mod:`.controller`,
:mod:`.daemon`, :mod:`.imex_process` and :mod:`.fake_imex` are the edges (leader election is
``dra_kube_client.LeaderElector``).
Nothing is imported here, so the IMEX stand-in (a process per readiness probe) starts fast.
"""
