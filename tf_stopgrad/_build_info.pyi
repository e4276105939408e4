# Interface of the compiled build record (cc/build_info.cc).
version: str
tf_version: str
cxx11_abi: int
compiler: str
source_dir: str
library_name: str
stop_gradient_op: str
prevent_gradient_op: str
