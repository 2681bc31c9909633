"""The names that torch's wrappers answer to, as of torch 2.13.0 (generated: do not edit).

Regenerate with `python tests/wrapper_api_table.py > pitfall_lint/analysis/wrapper_api.py`; the static
checker never imports torch. An attribute outside these, used on a wrapper, is not the wrapped model's."""

TORCH_VERSION = "2.13.0"

# nn.Module: methods, class attributes and what its code sets on self.
MODULE = frozenset(
    {
        "T_destination", "__annotations__", "__call__", "__class__", "__delattr__", "__dict__", "__dir__", "__doc__",
        "__eq__", "__format__", "__ge__", "__getattr__", "__getattribute__", "__getstate__", "__gt__", "__hash__",
        "__init__", "__init_subclass__", "__le__", "__lt__", "__module__", "__ne__", "__new__", "__reduce__",
        "__reduce_ex__", "__repr__", "__setattr__", "__setstate__", "__sizeof__", "__str__", "__subclasshook__",
        "__weakref__", "_apply", "_backward_hooks", "_backward_pre_hooks", "_buffers", "_call_impl",
        "_compiled_call_impl", "_forward_hooks", "_forward_hooks_always_called", "_forward_hooks_with_kwargs",
        "_forward_pre_hooks", "_forward_pre_hooks_with_kwargs", "_get_backward_hooks", "_get_backward_pre_hooks",
        "_get_name", "_is_full_backward_hook", "_load_from_state_dict", "_load_state_dict_post_hooks",
        "_load_state_dict_pre_hooks", "_maybe_warn_non_full_backward_hook", "_modules", "_named_members",
        "_non_persistent_buffers_set", "_parameters", "_register_load_state_dict_pre_hook", "_register_state_dict_hook",
        "_replicate_for_data_parallel", "_save_to_state_dict", "_slow_forward", "_state_dict_hooks",
        "_state_dict_pre_hooks", "_version", "_wrapped_call_impl", "add_module", "apply", "bfloat16", "buffers",
        "call_super_init", "children", "compile", "cpu", "cuda", "double", "dump_patches", "eval", "extra_repr",
        "float", "forward", "get_buffer", "get_extra_state", "get_parameter", "get_submodule", "half", "ipu",
        "load_state_dict", "modules", "mtia", "named_buffers", "named_children", "named_modules", "named_parameters",
        "parameters", "register_backward_hook", "register_buffer", "register_forward_hook", "register_forward_pre_hook",
        "register_full_backward_hook", "register_full_backward_pre_hook", "register_load_state_dict_post_hook",
        "register_load_state_dict_pre_hook", "register_module", "register_parameter", "register_state_dict_post_hook",
        "register_state_dict_pre_hook", "requires_grad_", "set_extra_state", "set_submodule", "share_memory",
        "state_dict", "to", "to_empty", "train", "training", "type", "xpu", "zero_grad"
    }
)

# nn.DataParallel, beyond nn.Module.
DATA_PARALLEL = frozenset(
    {
        "__class_getitem__", "__orig_bases__", "__parameters__", "__slots__", "_is_protocol", "device_ids", "dim",
        "gather", "module", "output_device", "parallel_apply", "replicate", "scatter", "src_device_obj"
    }
)

# DistributedDataParallel, beyond nn.Module.
DISTRIBUTED_DATA_PARALLEL = frozenset(
    {
        "__abstractmethods__", "__slots__", "_abc_impl", "_accum_grad_hooks", "_active_ddp_module",
        "_assign_modules_buffers", "_authoritative_rank", "_bucket_config", "_build_debug_param_to_name_mapping",
        "_build_params_for_reducer", "_check_and_sync_module_buffers", "_check_comm_hook", "_check_default_group",
        "_check_global_requires_backward_grad_sync", "_check_reducer_finalized", "_check_sync_bufs_post_fwd",
        "_check_sync_bufs_pre_fwd", "_clear_grad_buffer", "_comm_hooks", "_ddp_init_helper", "_ddp_sink_clone",
        "_default_broadcast_coalesced", "_delay_all_reduce_all_params", "_delay_all_reduce_params",
        "_delay_grad_buffer", "_delay_grad_views", "_delayed_all_reduce_hook", "_distributed_broadcast_coalesced",
        "_distributed_rank", "_find_common_rank", "_fire_reducer_autograd_hook", "_get_active_ddp_module",
        "_get_data_parallel_params", "_get_ddp_logging_data", "_get_parameters", "_has_rebuilt_buckets",
        "_inside_ddp_forward", "_join_config", "_lazy_init", "_lazy_init_ran", "_log_and_throw",
        "_match_all_reduce_for_bwd_pass", "_match_unused_params_allreduce", "_module_parameters",
        "_module_wait_for_copy_hook", "_mp_stream", "_passing_sync_batchnorm_handle", "_post_forward", "_pre_forward",
        "_register_accum_grad_hook", "_register_buffer_comm_hook", "_register_builtin_comm_hook",
        "_register_delay_all_reduce_hook", "_register_fused_optim", "_remove_autograd_hooks", "_root_copy_hook",
        "_run_ddp_forward", "_set_ddp_runtime_logging_sample_rate", "_set_ddp_sink_clone",
        "_set_params_and_buffers_to_ignore_for_model", "_set_sparse_metadata", "_set_static_graph",
        "_setup_in_backward_optimizers", "_static_graph_delay_allreduce_enqueued", "_submodule_to_event",
        "_sync_buffers", "_sync_final_model", "_sync_module_buffers", "_update_process_group", "_use_python_reducer",
        "batched_grad_copy", "broadcast_bucket_size", "broadcast_buffers", "bucket_bytes_cap",
        "bucket_bytes_cap_default", "bucket_bytes_cap_list", "buffer_hook", "device", "device_ids", "device_mesh",
        "device_type", "dim", "find_unused_parameters", "forward_sync_buffers", "gather", "gradient_as_bucket_view",
        "is_multi_device_module", "join", "join_device", "join_hook", "join_process_group", "logger", "mixed_precision",
        "module", "modules_buffers", "named_module_buffers", "no_sync", "output_device", "parameters_to_ignore",
        "process_group", "reducer", "register_comm_hook", "require_backward_grad_sync", "require_forward_param_sync",
        "scatter", "skip_all_reduce_unused_params", "static_graph", "to_kwargs", "use_side_stream_for_tensor_copies",
        "will_sync_module_buffers"
    }
)
