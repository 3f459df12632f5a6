"""Jupyter's settings for the learner's notebooks folder: `make lab` adds this
folder to JUPYTER_CONFIG_PATH, so the JupyterLab it starts reads this file
(and the learner's own ~/.jupyter settings as well).

Kernels listen on Unix sockets in Jupyter's runtime folder, which only this
user can enter, instead of TCP ports on loopback, as the course's self-check
and grader run them (autograder/selfcheck.py's
kernel_transport_config): ipykernel then has no reason to print "Kernel is
running over TCP without encryption" for every notebook a learner opens, and
no other user of the machine can connect to the learner's kernel.
"""
import os
import tempfile

from jupyter_core.paths import jupyter_runtime_dir

from autograder.selfcheck import kernel_transport_config

# A Unix socket's path is limited to about 100 bytes: a deep home folder gets a fresh private folder instead.
runtime = jupyter_runtime_dir()
os.makedirs(runtime, mode=0o700, exist_ok=True)
socket_dir = runtime if len(runtime) < 80 else tempfile.mkdtemp(prefix="tinylm-kernels-")
c = get_config()  # noqa: F821 (Jupyter's config loader defines get_config)
c.merge(kernel_transport_config(socket_dir))
