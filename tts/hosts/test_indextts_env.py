"""scripts/indextts_env.sh: an environment built in one place runs from another once
unpacked. The real build (uv sync of index-tts, a python-build-standalone interpreter)
needs a connected machine; here a tiny venv over a copy of this machine's python3 binary
stands for it: python3 -m unittest discover -s tts/hosts"""

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import unittest

from hosttest import HERE, rmtree

SCRIPT = os.path.join(HERE, "..", "..", "scripts", "indextts_env.sh")
VERSION = "%d.%d" % sys.version_info[:2]


def run(*args, check=True):
    p = subprocess.run(list(args), capture_output=True, text=True, timeout=120)
    if check and p.returncode != 0:
        raise AssertionError(f"{args} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p


@unittest.skipUnless(shutil.which("bash") and sys.platform.startswith("linux"), "needs bash on Linux")
class IndexTTSEnvTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="dubstudio-env-")
        self.addCleanup(rmtree, self.dir)

    def make_base(self, path):
        """A base interpreter of its own: this python's binary, finding the standard
        library through a link (a python-build-standalone tree has it inside)."""
        os.makedirs(os.path.join(path, "bin"))
        os.makedirs(os.path.join(path, "lib"))
        exe = os.path.realpath(sys.executable)
        shutil.copy2(exe, os.path.join(path, "bin", "python" + VERSION))
        os.symlink(sysconfig.get_paths()["stdlib"], os.path.join(path, "lib", "python" + VERSION))
        return os.path.join(path, "bin", "python" + VERSION)

    def test_build_move_unpack_relocate(self):
        built = os.path.join(self.dir, "connected")
        base_python = self.make_base(os.path.join(built, "uv", "python", "cpython-" + VERSION))
        venv = os.path.join(built, "index-tts", ".venv")
        run(base_python, "-m", "venv", "--without-pip", venv)
        site = os.path.join(venv, "lib", "python" + VERSION, "site-packages")
        with open(os.path.join(site, "hello_env.py"), "w") as f:
            f.write("WHO = 'installed in the environment'\n")
        tool = os.path.join(venv, "bin", "hello-tool")
        with open(tool, "w") as f:
            f.write(f"#!{venv}/bin/python\nimport hello_env, sys\nprint(hello_env.WHO, sys.prefix)\n")
        os.chmod(tool, 0o755)
        archive = os.path.join(self.dir, "indextts-env.tar.gz")
        out = run("bash", SCRIPT, "build", "--venv", venv, "--no-checkout", archive).stdout
        self.assertIn("wrote " + archive, out)

        # The connected machine's paths are gone on the studio machine.
        shutil.rmtree(built)

        dest = os.path.join(self.dir, "studio", "opt", "indextts-env")
        out = run("bash", SCRIPT, "unpack", archive, dest).stdout
        dest = os.path.realpath(dest)
        self.assertIn(f"HOST_PYTHON={dest}/venv/bin/python", out)
        python = os.path.join(dest, "venv", "bin", "python")
        got = run(python, "-c", "import hello_env, sys; print(sys.prefix, sys.base_prefix, hello_env.WHO)").stdout.split()
        self.assertEqual(got[:2], [os.path.join(dest, "venv"), os.path.join(dest, "python")])
        with open(os.path.join(dest, "venv", "pyvenv.cfg")) as f:
            self.assertIn(f"home = {dest}/python/bin", f.read())
        out = run(os.path.join(dest, "venv", "bin", "hello-tool")).stdout
        self.assertIn("installed in the environment " + os.path.join(dest, "venv"), out, "shebangs follow")

        # Moved again: broken until relocated.
        moved = os.path.join(self.dir, "elsewhere")
        os.rename(dest, moved)
        with self.assertRaises(FileNotFoundError, msg="the python link still points at the old place"):
            run(os.path.join(moved, "venv", "bin", "python"), "-c", "import sys; print(sys.prefix)", check=False)
        run("bash", SCRIPT, "relocate", moved)
        got = run(os.path.join(moved, "venv", "bin", "python"), "-c", "import hello_env, sys; print(sys.prefix)").stdout
        self.assertEqual(got.strip(), os.path.join(os.path.realpath(moved), "venv"))

    def test_refuses_what_is_not_an_environment(self):
        p = run("bash", SCRIPT, "relocate", self.dir, check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("not an unpacked environment", p.stderr)
        p = run("bash", SCRIPT, "build", "--venv", os.path.join(self.dir, "none"), "x.tgz", check=False)
        self.assertIn("does not exist", p.stderr)


if __name__ == "__main__":
    unittest.main()
