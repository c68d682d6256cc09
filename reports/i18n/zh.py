"""The capacity-baseline report's words in Chinese (the same keys as `en`; a test checks it)."""

ZH: dict[str, str] = {
    "doc_title": "容量基线:{name}",
    "subtitle": "{model} 运行于 {gpu}(TP {tp})· SLO {slo} · 生成于 {date}",
    "footer": "capplan 容量基线 · {name} · 生成于 {date}",
    "page_of": "第 {n} 页,共 {total} 页",
    "answer_heading": "结论",
    "answer_rate": (
        "以 {n} 台 {gpu}({load} 台承载负载 + {spare} 台备用)承载 {peak} 的峰值"
        "({peak_def}),满足 {slo},每月约 {cost}。"
    ),
    "answer_users": (
        "以 {n} 台 {gpu}({load} 台承载负载 + {spare} 台备用)承载 {peak} 个并发用户的峰值"
        "({peak_def}),满足 {slo},每月约 {cost}。"
    ),
    "peak_def_quantile": "{window} 窗口速率的 p{q}",
    "peak_def_given": "由规划者直接给定的峰值",
    "key_figures": "关键数字",
    "fig_peak": "规划峰值需求",
    "fig_limit": "单实例 SLO 上限",
    "fig_limit_value": "{value}({binding} 最先触限;{fail} 不达标)",
    "fig_limit_value_short": "{value}({binding} 最先触限)",
    "fleet_warning": "注意:集群仿真中 {n} 台实例不满足 SLO;见集群仿真验证。",
    "limit_given_answer": (
        "每实例上限 {limit} 为给定值，未经实测：本报告不含对它的负载测试"
        "（省略负载测试页与上限页）。"
    ),
    "observed_warning": (
        "注意：生产中每实例 {missed} 起已未满足 SLO，低于压测上限；"
        "见“生产中观测到的容量与压测上限对照”。"
    ),
    "fig_instances": "实例数",
    "fig_instances_value": "{n}({load} 台承载负载 + {spare} 台备用)",
    "fig_gpus": "GPU 数",
    "fig_cost": "每月成本",
    "fig_growth": "增长情景",
    "fig_growth_value": "×{growth}:{n} 台实例,{cost}",
    "compare_heading": "与上一期基线对比",
    "compare_previous": "上一期({name})",
    "compare_this": "本期规划",
    "compare_change": "变化",
    "compare_demand": "峰值需求",
    "compare_limit": "单实例上限",
    "compare_instances": "实例数",
    "compare_gpus": "GPU 数",
    "compare_cost": "每月成本",
    "risks_heading": "三大风险",
    "risk_high": "高",
    "risk_medium": "关注",
    "risk_low": "低",
    "risk_burst": "突发后的恢复",
    "risk_burst_recovered": (
        "突发负载 {burst}(稳态负载的 {burst_ratio} 倍)之后,TTFT p95 用了 {recovery} "
        "恢复正常;突发期间 TTFT p95 达到 {burst_p95}。"
    ),
    "risk_burst_not_recovered": (
        "突发负载 {burst}(稳态负载的 {burst_ratio} 倍)之后,直到测试结束 TTFT p95 "
        "仍未恢复正常;突发期间达到 {burst_p95}。"
    ),
    "risk_burst_nothing_completed": (
        "突发负载 {burst}(稳态负载的 {burst_ratio} 倍)期间没有任何请求成功完成。"
    ),
    "risk_burst_recovered_after": "突发结束 {recovery} 后 TTFT p95 恢复正常。",
    "risk_burst_unmeasured": "未测量突发恢复阶段;规划中的突发尚未经过测试。",
    "risk_burst_traffic": "真实流量的突发可达 {burst_peak}(规划峰值的 {factor} 倍)。",
    "risk_kv": "KV 缓存余量",
    "risk_kv_text": (
        "在单实例上限处(并发 {conc} 个请求,平均上下文 {ctx} 个 token),KV 缓存占用 "
        "{needed} / {capacity} 个 token:余量 {headroom}。"
    ),
    "risk_kv_short": (
        "在单实例上限处 KV 缓存需要 {needed} 个 token,但只能容纳 {capacity} 个:请求将排队或被抢占。"
    ),
    "risk_kv_burst": "突发期间 KV 使用率最高达 {kv}。",
    "risk_growth": "超出规划的增长",
    "risk_growth_text": (
        "本规划覆盖 ×{growth} 的增长。若增长到 ×{top},需要 {n} 台实例({delta:+d}),每月 {cost}。"
    ),
    "risk_growth_none": "本规划只覆盖 ×{growth} 的增长;未规划更大的情景。",
    "workload_heading": "负载画像",
    "workload_intro": (
        "来自 {files}({format})的 {rows} 个请求,时间跨度 {span};跳过 {skipped} 行。"
    ),
    "wl_mean_rate": "平均到达率",
    "wl_peak": "{window} 窗口峰值速率",
    "wl_peak_to_mean": "峰均比(60s)",
    "wl_cv": "到达间隔变异系数",
    "wl_input": "输入 token 均值 / p50 / p99",
    "wl_output": "输出 token 均值 / p50 / p99",
    "wl_classes": "短 / 中 / 长请求占比",
    "wl_prefix": "理想前缀缓存命中率",
    "wl_sessions": "会话数 / 每会话轮数(均值)",
    "wl_estimated": "token 数由分词器估算,并非服务端上报。",
    "wl_observed": "服务端观测 {metric} p50 / p95 / p99",
    "wl_metrics": (
        "读取自 Prometheus:{instances} 个实例的 {engine} 指标,步长 {step} 秒。"
        "指标无法提供的信息及所用假设:"
    ),
    "chart_rate": "到达率随时间变化",
    "chart_rate_peak": "规划峰值",
    "chart_rate_burst": "突发",
    "chart_hour": "按小时的日内分布",
    "chart_none": "{title}:未绘制,{reason}。",
    "chart_hour_none": "日志时间跨度为 {span},不足一天",
    "chart_hour_clock_none": "日志没有挂钟时间",
    "chart_input": "输入长度分布",
    "chart_output": "输出长度分布",
    "chart_prefix": "前缀复用率与缓存容量",
    "chart_prefix_ideal": "理想值(缓存无限)",
    "chart_prefix_none": "日志中没有前缀数据",
    "axis_time_h": "时间 (h)",
    "axis_time_s": "自测试开始的时间 (s)",
    "axis_hour": "小时",
    "axis_rate": "req/s",
    "axis_tokens": "token 数(对数)",
    "axis_requests": "请求数",
    "axis_cache": "缓存容量(token,对数)",
    "axis_hit": "命中率",
    "loadtest_heading": "压测与上限",
    "loadtest_intro": (
        "压测 {run},目标 {host}({model},{endpoint} 接口),共 {stages} 个阶段,随机种子 "
        "{seed},{workers} 个 Locust 工作进程。"
    ),
    "stage_table": "各阶段",
    "col_stage": "阶段",
    "col_role": "类型",
    "col_duration": "时长",
    "col_offered": "施加负载",
    "col_achieved": "完成负载",
    "col_ttft_p50": "TTFT p50",
    "col_ttft_p95": "TTFT p95",
    "col_tpot_p95": "TPOT p95",
    "col_errors": "错误数",
    "col_recovery": "恢复时间",
    "errors_table": "按类别的错误",
    "errors_classes": (
        "refused：HTTP 状态码 429 或 503（服务端拒绝负载）；server_error：其他 500–599；"
        "client_error：其他 400–499；connect、connect_refused：未能建立连接；"
        "disconnect：连接中断；timeout：未按时得到完整回答；"
        "stream_error：流中的错误事件。消息为该类别中最常见的一条。"
    ),
    "col_where": "阶段或档位",
    "col_class": "类别",
    "col_message": "消息",
    "limit_level": "极限搜索档位 {load}",
    "role_steady": "稳态",
    "role_burst": "突发",
    "role_recovery": "恢复",
    "role_step": "阶梯",
    "role_level": "搜索档位",
    "role_replay": "回放",
    "not_recovered": "未恢复",
    "chart_timeline": "施加负载与完成负载",
    "legend_offered": "施加",
    "legend_achieved": "完成",
    "chart_ttft": "TTFT p95(按发送时间滚动 10 s)",
    "chart_errors": "每秒错误数",
    "chart_queue": "服务端排队(vllm:num_requests_waiting)",
    "chart_kv": "KV 缓存使用率(vllm:kv_cache_usage_perc)",
    "not_scraped": "未采集",
    "axis_errors": "错误/s",
    "axis_waiting": "请求数",
    "axis_kv": "%",
    "axis_seconds": "s",
    "slo_line": "SLO",
    "chart_limit": "触限指标与负载({binding})",
    "chart_attainment": "SLO 达成率与负载",
    "chart_attainment_none": "没有负载档位记录达成率",
    "chart_levels_none": "上限文件中没有已测量的负载档位",
    "axis_load_rps": "施加负载 (req/s)",
    "axis_load_users": "并发用户数",
    "axis_attainment": "达成率 (%)",
    "legend_pass": "达标",
    "legend_fail": "不达标",
    "legend_uncertain": "不确定",
    "legend_invalid": "无效",
    "limit_sentence_client": (
        "单实例在满足 {slo} 时至少可承载 {value};压测客户端无法施加 {fail}"
        "(调度滞后),上限可能更高。共搜索 {levels} 个档位。"
    ),
    "limit_marker": "上限 {value}",
    "limit_fail_marker": "不达标 {value}",
    "limit_sentence": (
        "单实例在满足 {slo} 时可承载 {value};{binding} 最先触限;{fail} 不达标。"
        "共搜索 {levels} 个档位,容差 {tol}。"
    ),
    "limit_sentence_open": "单实例在满足 {slo} 时可承载 {value};搜索范围内更高的档位均未失败。",
    "limit_sentence_fast": (
        "单实例在满足 {slo} 时可承载 {value}(90% 区间 {low} 至 {high}),由快速搜索得出:"
        "先以闭环压测刻画服务器,再用其模型预测上限,"
        "并以 {chunks} 段确认压测中测得的模型误差加以修正。"
    ),
    "fast_evidence": (
        "快速搜索:刻画用时 {characterise},确认用时 {confirm};模型单独预测 {predicted};"
        "实测偏差(实测减模型的未达标比例){bias}。"
    ),
    "limit_gap_wide": "搜索在达到容差前停止:上限介于 {value} 与 {fail} 之间(差距 {gap})。",
    "limit_sentence_none": "没有任何档位满足 SLO {slo};尝试的最低档位已不达标。",
    "limit_table": "搜索档位",
    "observed_heading": "生产中观测到的容量与压测上限对照",
    "observed_sentence": (
        "生产中在 {checked} 满足时，每实例最高承载 {carried}（服务器自身的直方图，"
        "{window} 分钟窗口）；压测上限为 {limit}。"
    ),
    "observed_never": "生产中没有窗口满足 {checked}。",
    "observed_missed": "生产中从 {missed} 起未满足 SLO。",
    "observed_contradicts": ("生产中从 {missed} 起未满足 SLO，低于测得的上限：该上限与生产矛盾。"),
    "obs_col_instance": "实例",
    "obs_col_carried": "承载",
    "obs_col_observed_at": "该处观测值",
    "obs_col_missed_from": "未满足起点",
    "obs_col_windows": "满足 / 未满足窗口",
    "limit_heading": "单实例 SLO 上限",
    "col_load": "负载",
    "col_verdict": "判定",
    "col_value": "{binding}",
    "col_requests": "请求数",
    "error_in_flight": "负载测试停止时仍在进行（不算失败）",
    "col_completed_scheduled": "完成 / 调度",
    "requests_in_flight": "{completed} / {requests}（{n} 个在窗口结束时仍在进行）",
    "verdict_pass": "达标",
    "verdict_fail": "不达标",
    "verdict_uncertain": "不确定",
    "verdict_stopped_early": ",提前终止",
    "verdict_invalid": "无效(客户端滞后)",
    "verdict_unstable": ",未稳定",
    "failures_at_limit": "在上限 {load} 处有 {share} 的请求失败({classes})。",
    "failures_at_fail": "在首个不达标档位 {load} 处有 {share} 的请求失败({classes})。",
    "no_failures": "无",
    "prediction_sentence": (
        "引擎模型在虚拟时间中按相同的稳态规则搜索,预测上限为 {predicted};实测 {measured}({gap})。"
    ),
    "time_scale_note": ("被测端点运行速度为实际时间的 {scale} 倍(仿真器);负载与延迟均按其时间计。"),
    "chart_recovery": "突发后的恢复",
    "recovery_marker": "{value} 后恢复",
    "recovery_none": "本次压测没有突发与恢复阶段",
    "records_none": "{file} 缺失或为空:无时间线",
    "saturation": (
        "各级别中最高的完成速率：{value}（每秒在级别窗口内完成的请求，不论该级别是否达标；"
        "窗口结束时仍在进行的不计入）。"
    ),
    "littles_law": (
        "上限档位的利特尔法则:完成速率 {rate} × 平均 E2E {e2e} = 并发 {conc} 个请求"
        "(第 1 页与规划用上限本身乘以 E2E)。"
    ),
    "plan_heading": "容量规划",
    "arith_heading": "实例数计算",
    "arith_formula": "实例数 = 向上取整(峰值 × 增长 × (1 + 余量) / 单实例上限) + 备用",
    "arith_row": "×{growth}:向上取整({demand} × {h} / {limit}) + {spare} = "
    "向上取整({dwh} / {limit}) + {spare} = {load} + {spare} = {n}",
    "scenario_table": "增长情景",
    "col_growth": "增长",
    "col_demand": "需求",
    "col_with_headroom": "含余量",
    "col_limit": "单实例上限",
    "col_for_load": "承载负载",
    "col_spare": "备用",
    "col_instances": "实例数",
    "col_gpus": "GPU 数",
    "col_cost": "每月成本",
    "sensitivity_heading": "敏感性:不同增长与余量下的实例数",
    "sensitivity_corner": "增长 \\ 余量",
    "sensitivity_note": "高亮单元格即本规划。",
    "resources_heading": "资源",
    "res_gpu_mem": "每 GPU 显存",
    "res_weights": "每 GPU 模型权重",
    "res_kv_token": "每 GPU 每 token 的 KV 缓存",
    "res_kv_capacity": "KV 缓存容量",
    "res_kv_needed": "上限处所需 KV 缓存",
    "res_kv_headroom": "KV 缓存余量",
    "res_context": "每请求平均上下文",
    "res_concurrency": "上限处的并发请求数",
    "res_cpu": "每实例 / 总 CPU 核数",
    "res_ram": "每实例 / 总主机内存",
    "res_rule": "CPU 与内存的配置规则",
    "tokens_unit": "{value} 个 token",
    "cost_heading": "成本",
    "cost_price": "每 GPU 小时价格",
    "cost_hours": "每月小时数",
    "cost_monthly": "每月成本(本规划)",
    "cost_source": "价格来源",
    "queue_heading": "排队论交叉验证",
    "checks_heading": "规划的交叉验证",
    "queue_text": (
        "按 M/G/c 排队模型,以实测到达 CV² {ca2} 和服务 CV² {cs2} 计算,承载负载需要 "
        "{bursty} 台实例;若到达为泊松过程(CV² = 1)则需要 {poisson} 台。"
    ),
    "queue_wait": "排队概率 {pw},平均等待 {wait}。",
    "queue_none": "本规划没有排队论交叉验证。",
    "fleet_heading": "集群仿真验证",
    "fleet_text": (
        "以 {rate} 回放画像中的到达过程(含突发),在 {sim} 的虚拟时间内驱动 n 个引擎模型实例。"
    ),
    "fleet_verdict": "{routing}:n = {ok} 满足 SLO",
    "fleet_verdict_fail": ",n = {fail} 不满足",
    "fleet_verdict_none": "{routing}:仿真的实例数均不满足 SLO",
    "chart_fleet": "仿真 SLO 达成率与实例数",
    "axis_instances": "实例数",
    "routing_round_robin": "轮询",
    "routing_least_outstanding": "最少未完成请求",
    "col_routing": "路由",
    "col_attainment": "达成率",
    "col_meets": "满足 SLO",
    "yes": "是",
    "no": "否",
    "fleet_none": "本规划没有集群仿真。",
    "method_heading": "假设与方法",
    "method_metrics": "指标定义",
    "def_ttft": "TTFT:首个非空内容块的到达时间减去发送时间。",
    "def_tpot": "TPOT(每请求):(E2E - TTFT) / (输出 token 数 - 1),仅当输出 token 数 > 1。",
    "def_itl": "ITL:相邻内容块之间的每个间隔(合并统计)。",
    "def_e2e": "E2E:最后一个内容块的到达时间减去发送时间。",
    "def_lag": (
        "调度延迟:实际发送时间减去计划发送时间(开环)。延迟同时以计划发送时间为起点记录,"
        "因此客户端变慢也无法掩盖排队。"
    ),
    "def_tokens": "输出 token 数:取服务端 usage 统计;否则按内容块计数,并将该次压测标记为估算。",
    "def_good": (
        "合格请求:成功且满足每一项单请求阈值(含等号)。有效吞吐 = 合格请求数 / 阶段时长。"
        "SLO 达成率 = 合格请求数 / 阶段内计划发送的全部请求数(错误与超时计为不合格)。"
    ),
    "method_steps": "方法",
    "method_profile": "需求来自 {rows} 条请求日志的画像:规划峰值为 {peak_def} = {peak}。",
    "method_limit_given": "单实例上限 {limit} 是给定给规划的数值，并非本报告中负载测试的实测结果。",
    "method_limit": (
        "单实例上限是单个实例满足 {slo} 时的最高{dimension}:搜索先按指数扩大负载找到失败"
        "档位,再把最高达标档位与最低不达标档位之间的差距缩小到 {tol}。"
    ),
    "method_instances": (
        "实例数 = 向上取整(峰值 × 增长 × (1 + 余量 {headroom}) / 上限) + {spare} 台备用"
        "(N+{spare})。"
    ),
    "method_cost": "成本 = 实例数 × {tp} 块 GPU × 每 GPU 小时 {price} × 每月 {hours} 小时。",
    "method_checks": (
        "两项交叉验证:按实测突发程度的 M/G/c 排队近似,以及用同一引擎模型在虚拟时间中仿真整个集群。"
    ),
    "dimension_rate": "到达率",
    "dimension_concurrency": "并发数",
    "warnings_heading": "注意事项",
    "warn_digest": "本规划所用画像的摘要与本报告给定画像的摘要不同。",
    "warn_estimated": "本次压测的输出 token 数为估算值,并非服务端上报。",
    "warn_interrupted": "压测被中断;最后一个阶段不完整。",
    "warn_profile_estimated": "画像中的 token 数来自分词器估算。",
    "warn_none": "输入中未发现需要注意的问题。",
    "warn_plan_note": "规划器附注:{note}",
    "warn_stage": "压测阶段 {stage} 未施加所要求的负载:{text}。",
    "warn_stages": "压测阶段有 {n} 条负载有效性警告(英文原文见英文版报告)。",
    "warn_plan_notes": "规划器留有 {n} 条附注(英文原文见英文版报告)。",
    "appendix_heading": "附录:压测元数据与输入摘要",
    "meta_run": "压测",
    "meta_command": "命令",
    "meta_versions": "capplan / Locust 版本",
    "meta_target": "目标",
    "meta_model": "模型 / 接口",
    "meta_seed": "随机种子 / 工作进程",
    "meta_time": "开始 / 结束",
    "meta_plan": "阶段计划",
    "meta_stage": "{name}:{role},{duration},{load}",
    "meta_profile_source": "画像来源",
    "meta_profile_rows": "保留 / 跳过行数",
    "digest_heading": "输入文件摘要 (sha256)",
    "col_role_file": "输入",
    "col_path": "路径",
    "col_sha": "sha256",
    "digest_role_profile": "画像",
    "digest_role_run": "压测信息",
    "digest_role_stages": "阶段汇总",
    "digest_role_records": "请求记录",
    "digest_role_server_metrics": "服务端指标",
    "digest_role_limit": "上限结果",
    "digest_role_plan": "规划",
    "digest_role_previous": "上一期规划",
    "recorded_digests": "各步骤记录的画像摘要",
    "rec_profile": "提供给报告的画像",
    "rec_run": "压测",
    "rec_limit": "上限搜索",
    "rec_plan": "规划",
    "match": "一致",
    "mismatch": "不一致",
    "unknown": "未记录",
    "na": "无",
    # routers (capplan plan --routing; reports/pages/routing.py)
    "routing_power_of_two": "随机二选一",
    "routing_session_affinity": "会话亲和",
    "routing_prefix_aware": "前缀感知",
    "router_heading": "各路由策略所需实例数",
    "router_assumed": (
        "{n} 个实例的规划假定采用{routing}路由;在该路由下,仿真集群需要 {need} 个实例才能满足 SLO。"
    ),
    "router_other": "{routing} {need} 个",
    "router_others": "其他路由策略所需实例数:{others}。",
    "router_more_than": "多于 {n}",
    "router_ideal": (
        "前缀命中率由仿真引擎自身的缓存在 n = {n} 时统计,对照画像的理想命中率 {ideal}"
        "(所有较早的提示块仍在缓存中)。"
    ),
    "router_ideal_none": "画像中没有前缀复用统计,无法与理想命中率对照。",
    "router_threshold": (
        "前缀感知路由在最长匹配前缀覆盖提示块的至少 {threshold} 时,将请求发往该实例,"
        "否则发往负载最低的实例。"
    ),
    "col_router_needs": "满足 SLO 的最少实例数",
    "col_prefix_hits": "n 时的前缀命中率",
    "col_of_ideal": "占理想值比例",
    # autoscaling (capplan plan --autoscale)
    "autoscale_heading": "自动扩缩与静态规划对比",
    "autoscale_intro": (
        "每个策略都在画像的 {days} 天流量（含突发）上模拟，"
        "新实例在 {cold} 的冷启动后才开始服务。"
        "请求等待实例 {slots} 个请求槽之一不超过 {budget} 即为达标；"
        "目标为 {target} 的请求达标。"
    ),
    "autoscale_col_policy": "策略",
    "autoscale_col_worst_hour": "最差小时",
    "autoscale_col_burst": "突发后最差一分钟",
    "autoscale_col_gpu_h": "GPU 小时 / 月",
    "autoscale_col_vs_static": "相对静态",
    "autoscale_col_mean": "平均实例数",
    "autoscale_col_hour": "小时（UTC）",
    "autoscale_recommended": "推荐（*）：{policy}。",
    "autoscale_hourly_heading": "按小时的达标率",
    "autoscale_manifests": (
        "已为 {policy} 生成 KEDA ScaledObject 和 HPA 清单：{query}，每副本目标 {threshold}。"
    ),
    "autoscale_method": "流量的重建方法与排队模型（及其实测误差）见自动扩缩指南。",
    "autoscale_label_static": "静态",
    "autoscale_label_reactive_queue": "按排队请求",
    "autoscale_label_reactive_kv": "按 KV 缓存占用",
    "autoscale_label_rate": "按请求速率",
    "autoscale_label_schedule": "按时间表",
    "digest_role_verify": "机队验证文件",
}
