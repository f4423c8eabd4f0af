import { api, page } from '../api.ts';
import { h, replace, since } from '../dom.ts';
import type { Items, JobView } from '../types.ts';
import { Notice, table, type View } from '../view.ts';

/** Failed jobs, with a retry each, a retry of them all, and a link to each in Bull Board. */
export function jobsView(): View {
  const notice = new Notice();
  const list = h('div', { class: 'table-wrap' });
  const retryAll = h('button', { type: 'button' }, 'Retry all failed jobs');
  let shown: unknown;

  async function retry(job: JobView): Promise<void> {
    const answer = await api<unknown>('POST', `/v1/jobs/${encodeURIComponent(job.id)}/retry?queue=${encodeURIComponent(job.queue)}`);
    if (!answer.ok) return notice.error(answer.message);
    notice.ok(`Job ${job.id} of ${job.queue} sent back to be retried.`);
    shown = undefined;
    await refresh();
  }

  retryAll.addEventListener('click', () => {
    void (async () => {
      const answer = await api<{ retried: Record<string, number> }>('POST', '/v1/jobs/retry-failed');
      if (!answer.ok) return notice.error(answer.message);
      const total = Object.values(answer.body.retried).reduce((a, b) => a + b, 0);
      notice.ok(`${total} failed jobs sent back to be retried.`);
      shown = undefined;
      await refresh();
    })();
  });

  function boardLink(job: JobView): HTMLAnchorElement {
    return h(
      'a',
      {
        href: `${page.board}/queue/${encodeURIComponent(job.queue)}/${encodeURIComponent(job.id)}`,
        'aria-label': `Job ${job.id} of ${job.queue} in Bull Board`,
      },
      'Bull Board',
    );
  }

  async function refresh(): Promise<void> {
    const answer = await api<Items<JobView>>('GET', '/v1/jobs?state=failed&limit=200');
    if (!answer.ok) return notice.error(answer.message);
    if (answer.body === shown) return;
    shown = answer.body;
    const jobs = answer.body.items;
    retryAll.disabled = jobs.length === 0;
    replace(
      list,
      jobs.length === 0
        ? h('p', {}, 'No failed jobs.')
        : table(
            'Failed jobs',
            ['Queue', 'Job', 'Name', 'Attempts', 'Failed', 'Reason', '', ''],
            jobs.map((j) => {
              const button = h('button', { type: 'button', 'aria-label': `Retry job ${j.id} of ${j.queue}` }, 'Retry');
              button.addEventListener('click', () => void retry(j));
              return [j.queue, j.id, j.name, j.attemptsMade, since(j.finishedAt), j.failedReason ?? '', button, boardLink(j)];
            }),
          ),
    );
  }

  return {
    id: 'jobs',
    title: 'Failed jobs',
    mount(root) {
      replace(
        root,
        h('h2', {}, 'Failed jobs'),
        notice.el,
        h(
          'p',
          {},
          retryAll,
          ' ',
          h('a', { href: `${page.board}/` }, 'Open Bull Board'),
          h('span', { class: 'meta' }, ' (asks for the API token as the password)'),
        ),
        list,
      );
    },
    refresh,
  };
}
