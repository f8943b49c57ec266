# cuda/cudnn.sh: sourced by cuda/build.sh and scripts/gpu-gpt-kernels-check.sh.
# Finds cuDNN 9 (optional: sd_compute_attention_cudnn.cu's fused attention) and sets
#   cudnn_root     the directory with include/cudnn.h and lib/libcudnn.so.9, or ""
#   cudnn_cflags   (-DSD_WITH_CUDNN -I...) or empty
#   cudnn_ldflags  (-L... -l:libcudnn.so.9 -Xlinker -rpath=...) or empty
# Looks at $CUDNN_HOME, then the pip wheel nvidia-cudnn-cu* of PyTorch's
# environment (/opt/torch/.venv) or python3. SYMDDP_NO_CUDNN=1 builds without it.
cudnn_root=""
cudnn_cflags=()
cudnn_ldflags=()
if [ "${SYMDDP_NO_CUDNN:-0}" != 1 ]; then
    cand="${CUDNN_HOME:-}"
    if [ -z "$cand" ]; then
        for py in /opt/torch/.venv/bin/python3 python3; do
            command -v "$py" >/dev/null || continue
            cand="$("$py" -c "import importlib.util as u; print(list(u.find_spec('nvidia.cudnn').submodule_search_locations)[0])" 2>/dev/null || true)"
            [ -n "$cand" ] && break
        done
    fi
    if [ -n "$cand" ] && [ -f "$cand/include/cudnn.h" ] && [ -e "$cand/lib/libcudnn.so.9" ]; then
        cudnn_root="$cand"
        cudnn_cflags=(-DSD_WITH_CUDNN -I"$cand/include")
        cudnn_ldflags=(-L"$cand/lib" -l:libcudnn.so.9 -Xlinker -rpath="$cand/lib")
    fi
fi
