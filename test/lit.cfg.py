# lit configuration of the MLA regression suite.
import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "MLA"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["CMakeLists.txt", "README.txt", "lit.cfg.py", "lit.site.cfg.py", "Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.mla_obj_root, "test")

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)

# FileCheck checks variable scopes like upstream and Triton do.
config.substitutions.append(
    ("FileCheck", "FileCheck --enable-var-scope --dump-input=fail"))
config.substitutions.append(("%mla_src_root", config.mla_src_root))

tool_dirs = [config.mla_tools_dir, config.llvm_tools_dir]
tools = ["mla-opt", "mla-translate", "mla-run", "mla-gen"]
llvm_config.add_tool_substitutions(
    [ToolSubst(t, unresolved="ignore") for t in tools], tool_dirs)
