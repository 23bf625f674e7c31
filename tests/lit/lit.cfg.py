# lit configuration for neuron-cc: FileCheck tests of the dialects, passes and tools.
import os
import lit.formats

config.name = "neuron-cc"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "lit.cfg.py", "lit.site.cfg.py", "CMakeLists.txt"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.neuron_build_dir, "tests", "lit")

# Our tools first, then LLVM's FileCheck / not / count.
config.environment["PATH"] = os.pathsep.join(
    [os.path.join(config.neuron_build_dir, "bin"), config.llvm_tools_dir,
     config.environment.get("PATH", os.environ.get("PATH", ""))])
config.substitutions.append(("%examples", os.path.join(config.neuron_source_dir, "examples")))
config.substitutions.append(("%python", "/usr/bin/python3"))

# valgrind (installed by scripts/setup.sh) runs the compiler in memcheck.test.
import shutil  # noqa: E402
if shutil.which("valgrind"):
    config.available_features.add("valgrind")
